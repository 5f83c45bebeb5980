-- Sold: correct a SKU's stock hash by units MySQL sold that Redis never
-- counted (or counted without MySQL): ARGV[2] units moved from available
-- to sold (a negative count moves them back).
-- KEYS[1] stock hash. ARGV[1] the hash's 'gen' observed with the counts
-- the correction was computed from ('' when it had none).
-- 'gen' is set when a hash is created (rebuild.lua, adjust.lua) and
-- changed by every correction, so a correction applies at most once, and
-- never to a hash built again since it was computed. No Try, Finish or
-- restock changes the difference (they move units, not the offset), so
-- no 'ver' check: it applies on a SKU under load. It never makes
-- available negative: units a Try took meanwhile are left for a later pass
-- (their confirm is refused by MySQL's guard, and released).
-- Returns the units moved (0: nothing, or the hash is gone or rebuilt).
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local g = redis.call('HGET', KEYS[1], 'gen') or ''
if g ~= ARGV[1] then return 0 end
local d = tonumber(ARGV[2])
if d > 0 then
  d = math.min(d, tonumber(redis.call('HGET', KEYS[1], 'available')))
else
  d = -math.min(-d, tonumber(redis.call('HGET', KEYS[1], 'sold')))
end
if d == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -d)
redis.call('HINCRBY', KEYS[1], 'sold', d)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
local n = table.concat(redis.call('TIME'), '.')
if n == g then n = g .. '+' end
redis.call('HSET', KEYS[1], 'gen', n)
return d
