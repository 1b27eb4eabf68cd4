-- Reserve books the key's next departure (after common.lua).
--
-- KEYS[1+i]            the sorted set of window i: its last N departures
--                      (score: the departure; member: "departure:seq")
-- ARGV[4]              maxWait (µs): a departure further from now is not booked
-- ARGV[3+2i], [4+2i]   window i's N, and its Per (µs)
-- returns {booked (0 or 1), wait (µs, rounded up), paused (0 or 1)}

local maxWait = tonumber(ARGV[4])
local r = pace()
if r >= rate then
	cut = 0
end

local dep = math.max(now, last, pause)
if r > 0 then
	dep = math.max(dep, tat - tolerance(r))
end
for i = 2, #KEYS do
	local n, per = tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2])
	-- the n-th newest: none while fewer than n are kept
	local nth = redis.call('ZRANGE', KEYS[i], -n, -n, 'WITHSCORES')
	if nth[2] then
		dep = math.max(dep, tonumber(nth[2]) + per)
	end
end

local paused = 0
if pause > now and pause >= dep then
	paused = 1
end
local wait = math.ceil(dep - now)
if dep - now > maxWait then
	return {0, wait, paused}
end

last = dep
if r > 0 then
	tat = math.max(tat, dep) + 1e6 / r
end
seq = seq + 1
for i = 2, #KEYS do
	local n, per = tonumber(ARGV[2 * i + 1]), tonumber(ARGV[2 * i + 2])
	redis.call('ZADD', KEYS[i], num(dep), num(dep) .. ':' .. num(seq))
	redis.call('ZREMRANGEBYRANK', KEYS[i], 0, num(-(n + 1)))
	expire(KEYS[i], dep + per)
end
save()
return {1, wait, paused}
