-- Try: reserve ARGV[1] units for order ARGV[3] until deadline ARGV[2] (Unix ms).
-- KEYS[1] stock hash (its 'ver' counts every change, for the reconcilers), KEYS[2] reservation hash, KEYS[3] live set.
-- Returns 1 reserved now, 2 already reserved or confirmed (idempotent repeat),
-- 0 out of stock, -2 order already cancelled or expired (anti-hanging),
-- -3 unknown SKU.
local st = redis.call('HGET', KEYS[2], 'state')
if st then
  if st == 'reserved' or st == 'confirmed' then return 2 end
  return -2
end
local avail = tonumber(redis.call('HGET', KEYS[1], 'available'))
if avail == nil then return -3 end
local q = tonumber(ARGV[1])
if avail < q then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -q)
redis.call('HINCRBY', KEYS[1], 'occupied', q)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[2], 'qty', q, 'state', 'reserved', 'deadline', ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1
