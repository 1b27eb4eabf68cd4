-- Reserve books the key's next departure, of n units (after common.lua).
--
-- KEYS[1+i]            the sorted set of window i: its last N units departed
--                      (score: the departure; member: "departure:seq:unit")
-- ARGV[4]              maxWait (µs): a departure further from now is not booked
-- ARGV[5]              n, the units of the departure (>= 1)
-- ARGV[4+2i], [5+2i]   window i's N, and its Per (µs)
-- returns {booked (0 or 1), wait (µs, rounded up; at most the longest
-- time.Duration), paused (0 or 1)}

local maxWait = tonumber(ARGV[4])
local units = tonumber(ARGV[5])
local longest = 9223372036854775 -- µs: the longest time.Duration
local r = pace()
if r >= rate then
	cut = 0
end

local dep = math.max(now, last, pause)
if r > 0 then
	-- n tokens of a bucket that holds depth+1 (all it holds, if fewer):
	-- the departure may go that much less ahead of tat.
	local held = math.min(units, depth + 1)
	dep = math.max(dep, tat - tolerance(r) + (held - 1) * 1e6 / r)
end
for i = 2, #KEYS do
	local n, per = tonumber(ARGV[2 * i + 2]), tonumber(ARGV[2 * i + 3])
	-- its last unit outlives the unit n before it: the (n-u+1)-th newest
	-- (none while fewer are kept)
	local back = n - math.min(units, n) + 1
	local nth = redis.call('ZRANGE', KEYS[i], -back, -back, 'WITHSCORES')
	if nth[2] then
		dep = math.max(dep, tonumber(nth[2]) + per)
	end
end

local paused = 0
if pause > now and pause >= dep then
	paused = 1
end
local wait = math.min(math.ceil(dep - now), longest)
if wait > maxWait then
	return {0, wait, paused}
end

last = dep
if r > 0 then
	tat = math.max(tat, dep) + units * 1e6 / r
end
seq = seq + 1
for i = 2, #KEYS do
	local n, per = tonumber(ARGV[2 * i + 2]), tonumber(ARGV[2 * i + 3])
	-- one member per unit, at most n, added a thousand at a time (a
	-- command's arguments are unpacked onto Lua's stack)
	local score, add = num(dep), {}
	for u = 1, math.min(units, n) do
		add[#add + 1] = score
		add[#add + 1] = score .. ':' .. num(seq) .. ':' .. u
		if #add == 2000 then
			redis.call('ZADD', KEYS[i], unpack(add))
			add = {}
		end
	end
	if #add > 0 then
		redis.call('ZADD', KEYS[i], unpack(add))
	end
	redis.call('ZREMRANGEBYRANK', KEYS[i], 0, num(-(n + 1)))
	expire(KEYS[i], dep + per)
end
save()
return {1, wait, paused}
