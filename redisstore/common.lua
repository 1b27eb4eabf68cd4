-- What both scripts share: the Redis server's clock, the key's state, its
-- pace, and how long the state is kept. The arithmetic is
-- throttle.MemoryStore's (storemem.go, store.go), in microseconds.
--
-- KEYS[1]  the key's hash: tat (GCRA's theoretical arrival time), last (the
--          latest departure booked), pause (no departure before it), cut
--          and cutAt (a pace cut, climbing back since cutAt), seq (a count
--          of bookings)
-- ARGV[1]  Policy.Rate per second; 0: unpaced
-- ARGV[2]  the bucket's tolerance in intervals: max(1, Burst-1)-1; 0 with Queue
-- ARGV[3]  the margin (µs) kept past the moment the state stops mattering

-- Redis 7 replicates a script's effects, not the script, so that it may read
-- TIME before it writes; older servers must be asked to.
if redis.replicate_commands then redis.replicate_commands() end

-- A key of another type than the script keeps there (someone else's write)
-- is dropped: its state is lost, as after an expiry, and the key works
-- again, where every call would fail on it.
for i = 1, #KEYS do
	local want = 'zset'
	if i == 1 then
		want = 'hash'
	end
	local kind = redis.call('TYPE', KEYS[i]).ok
	if kind ~= want and kind ~= 'none' then
		redis.call('DEL', KEYS[i])
	end
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local depth = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])

local h = redis.call('HMGET', KEYS[1], 'tat', 'last', 'pause', 'cut', 'cutAt', 'seq')
local tat = tonumber(h[1]) or 0
local last = tonumber(h[2]) or 0
local pause = tonumber(h[3]) or 0
local cut = tonumber(h[4]) or 0
local cutAt = tonumber(h[5]) or 0
local seq = tonumber(h[6]) or 0

-- num writes x without losing a digit (Lua's tostring keeps 14).
local function num(x)
	return string.format('%.17g', x)
end

-- pace is the key's pace now: rate, or a cut pace climbing back by a tenth
-- of rate per second; 0 for an unpaced key.
local function pace()
	if rate <= 0 then
		return 0
	end
	if cut <= 0 then
		return rate
	end
	return math.min(rate, cut + rate * 0.1 * (now - cutAt) / 1e6)
end

local longest = 9223372036854775 -- µs: the longest time.Duration

-- span is n intervals at pace r (µs; 0 for an unpaced key), saturated far
-- beyond the longest time.Duration (which a wait saturates at) but never
-- inf: at a pace as slow as 1e-303 a second, 1e6 / r was inf, and tat -
-- tolerance, inf - inf, let every departure go at once.
local function span(n, r)
	if r <= 0 or n <= 0 then
		return 0
	end
	return math.min(n * 1e6 / r, 2 ^ 80)
end

-- tolerance is how far ahead of tat a departure may go at pace r (µs).
local function tolerance(r)
	return span(depth, r)
end

-- expire sets key to live until µs (on the server's clock), and margin;
-- at most some 30,000 years (PEXPIRE wants an integer it can add to now).
local function expire(key, till)
	local ms = math.ceil((till - now + margin) / 1000)
	redis.call('PEXPIRE', key, num(math.min(math.max(1, ms), 1e15)))
end

-- save writes the hash, to live until its state no longer holds a
-- departure: tat, last and pause passed, and a cut pace climbed back.
local function save()
	local till = math.max(tat, last, pause)
	if cut > 0 and rate > 0 then
		till = math.max(till, cutAt + (rate - cut) / (rate * 0.1) * 1e6)
	end
	redis.call('HSET', KEYS[1], 'tat', num(tat), 'last', num(last), 'pause', num(pause),
		'cut', num(cut), 'cutAt', num(cutAt), 'seq', num(seq))
	expire(KEYS[1], till)
end
