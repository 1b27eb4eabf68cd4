-- Slow shares a pause and a cut pace (after common.lua).
--
-- ARGV[4]  the pause (µs from now); 0: none
-- ARGV[5]  the pace cut to (per second); 0: not cut

local pauseFor = tonumber(ARGV[4])
local slower = tonumber(ARGV[5])

local r = pace()
if slower > 0 and slower < r then
	cut, cutAt, r = slower, now, slower
end
if pauseFor > 0 then
	local till = now + pauseFor
	pause = math.max(pause, till)
	if r > 0 then -- after the pause, one every 1/r: no burst
		tat = math.max(tat, till + tolerance(r))
	end
end
save()
return 1
