-- Restock: add ARGV[1] units to a SKU's total and available in Redis, as
-- MySQL restock number ARGV[2] (the inventory row's version after it).
-- KEYS[1] stock hash, KEYS[2] the set of restock versions applied above
-- the floor. The hash's 'rv' is the floor: the MySQL version up to which a
-- reconciler repair took every restock from MySQL. A restock at or below
-- the floor, or already in the set, is skipped, so a late or repeated
-- restock never adds its units twice, and concurrent restocks may land in
-- any order. Returns 1 applied, 0 already counted, -3 no hash.
if redis.call('EXISTS', KEYS[1]) == 0 then return -3 end
local floor = tonumber(redis.call('HGET', KEYS[1], 'rv') or '0')
local v = tonumber(ARGV[2])
if v <= floor then return 0 end
if redis.call('ZADD', KEYS[2], 'NX', v, ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'total', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'available', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return 1
