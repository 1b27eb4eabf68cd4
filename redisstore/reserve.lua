-- Reserve books the key's next departure, of n units (after common.lua).
--
-- KEYS[2]              (with windows) the sorted set of the key's
--                      departures that may still count in one of its
--                      windows, one member each whatever its units (score:
--                      the departure and the margin it counts beyond Per;
--                      member: "cum:units", the units of it and of every
--                      departure before it in the set, zero-padded so that
--                      members of one score sort in order, then its own):
--                      every window counts them, whatever the windows they
--                      were booked under
-- ARGV[4]              maxWait (µs): a departure further from now is not booked
-- ARGV[5]              n, the units of the departure (>= 1)
-- ARGV[6]              the margin (µs, throttle.WindowMargin) the departure
--                      counts beyond each window's Per
-- ARGV[5+2i], [6+2i]   window i's N, and its Per (µs)
-- returns {booked (0 or 1), wait (µs, rounded up; at most the longest
-- time.Duration), paused (0 or 1)}

local maxWait = tonumber(ARGV[4])
local units = tonumber(ARGV[5])
local r = pace()
local cutFrom = cut -- the slowest pace since the cut: a pause's bucket was set at it or faster
if r >= rate then
	cut = 0
end

-- member reads a window's member: its cum, and its units. One that is not
-- the script's own (someone else's write) fails the call, before it
-- writes: see below.
local function member(m)
	local c, u = string.match(m, '^(%d+):(%d+)$')
	if not c then
		error('unreadable')
	end
	return tonumber(c), tonumber(u)
end

local function name(cum, u)
	return string.format('%016.0f:%.0f', cum, u)
end

-- rebase numbers a window's members from 0 again, and returns its newest
-- cum: a cum stays exact in a double (below 2^53) however long the set
-- lives.
local function rebase(key)
	local all = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
	if not all[1] then
		return 0
	end
	local c, u = member(all[1])
	local base, top, add = c - u, 0, {}
	redis.call('DEL', key)
	for j = 1, #all, 2 do
		c, u = member(all[j])
		top = c - base
		add[#add + 1] = all[j + 1]
		add[#add + 1] = name(top, u)
		if #add == 2000 then -- a command's arguments are unpacked onto Lua's stack
			redis.call('ZADD', key, unpack(add))
			add = {}
		end
	end
	if #add > 0 then
		redis.call('ZADD', key, unpack(add))
	end
	return top
end

-- cumAt is the cum of the member of the given rank.
local function cumAt(key, rank)
	return (member(redis.call('ZRANGE', key, rank, rank)[1]))
end

local dep = math.max(now, last, pause)
if r > 0 then
	-- n tokens of a bucket that holds depth+1 (all it holds, if fewer):
	-- the departure may go that much less ahead of tat.
	local held = math.min(units, depth + 1)
	dep = math.max(dep, tat - span(depth + 1 - held, r))
end
local win = KEYS[2]
local wins = (#ARGV - 6) / 2
-- The departures kept, oldest first: the units before the first (base),
-- up to the first (oldest) and up to the last (newest), and the last's
-- score (top); all 0 when none is.
local base, oldest, newest, top = 0, 0, 0, 0
local function kept()
	local first = redis.call('ZRANGE', win, 0, 0)
	if first[1] then
		local c, u = member(first[1])
		local last = redis.call('ZRANGE', win, -1, -1, 'WITHSCORES')
		base, oldest, newest, top = c - u, c, member(last[1]), tonumber(last[2])
	end
end
-- room finds how late a window of n per per lets the departure go, from
-- dep. Its units must find room among those of the departures kept (all
-- before it): the oldest leave first, so it goes Per after the one that
-- holds the excess's last unit (found by halving the ranks), whose score
-- holds its own margin. Those that no longer count in this window (kept
-- for a longer one) are the oldest: the room they make is behind dep
-- already.
local function room(n, per, dep)
	local excess = newest - base + math.min(units, n) - n
	if excess <= 0 then
		return dep
	end
	local lo, hi = 0, redis.call('ZCARD', win) - 1
	if oldest >= base + excess then
		hi = 0
	end
	while lo < hi do
		local mid = math.floor((lo + hi) / 2)
		if cumAt(win, mid) >= base + excess then
			hi = mid
		else
			lo = mid + 1
		end
	end
	local at = redis.call('ZRANGE', win, lo, lo, 'WITHSCORES')
	return math.max(dep, tonumber(at[2]) + per)
end
if win then
	local ok, d = pcall(function()
		kept()
		local d = dep
		for i = 1, wins do
			d = room(tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i]), d)
		end
		return d
	end)
	if ok then
		dep = d
	else
		-- A set that holds a member not of the script's is dropped, as a
		-- key of another type is (see common.lua).
		redis.call('DEL', win)
		base, oldest, newest, top = 0, 0, 0, 0
	end
end

-- The pause held the departure if it goes at its end, or within half a
-- turn of it: tat was set at the pace when Slow came, which may have
-- climbed a little since (see throttle.Reservation.Paused).
local paused = 0
local held = pause
if r > 0 then
	-- A departure of n units waits past the pause's end for the n-1
	-- tokens beyond the one Slow left the bucket at its end: held by the
	-- pause all the same (found in review t9).
	held = pause + span(1, r) / 2 + span(math.min(units, depth + 1) - 1, r)
	if cutFrom > 0 and cutFrom < r then
		-- Slow set tat at the pace then, as slow as the cut: the
		-- departure it lets go first comes up to the difference of the
		-- bucket's tolerance at both paces after the pause's end.
		held = held + tolerance(cutFrom) - tolerance(r)
	end
end
if pause > now and held >= dep then
	paused = 1
end
local wait = math.min(math.ceil(dep - now), longest)
if wait > maxWait then
	return {0, wait, paused}
end

last = dep
if r > 0 then
	tat = math.max(tat, dep) + span(units, r)
end
seq = seq + 1
if win then
	-- The departure counts for Per from its score: its booking and the
	-- margin of this call, the one that booked it (regression, found in
	-- review 46: every member counted for the margin of the call asking
	-- now, and a departure booked by a process whose requests took 1 ms
	-- to arrive went Per and 2 ms after another's whose took 150 ms: 11 of
	-- a window of 10 reached the server within one Per). A score is never
	-- below the newest, so that the members' order by score stays that of
	-- their units: a departure counts at least as long as any booked
	-- before it, by up to the difference of their margins. It counts as
	-- at most the largest N. What counts no longer, the longest Per before
	-- it, never counts again: every later departure goes after it.
	local keep, most = 0, 0
	for i = 1, wins do
		most = math.max(most, tonumber(ARGV[5 + 2 * i]))
		keep = math.max(keep, tonumber(ARGV[6 + 2 * i]))
	end
	local score = math.max(dep + tonumber(ARGV[6]), top)
	redis.call('ZREMRANGEBYSCORE', win, '-inf', num(dep - keep))
	local u = math.min(units, most)
	if newest + u > 2 ^ 52 then
		newest = rebase(win)
	end
	redis.call('ZADD', win, num(score), name(newest + u, u))
	expire(win, score + keep)
end
save()
return {1, wait, paused}
