-- Try: reserve ARGV[1] units for order ARGV[3] until deadline ARGV[2] (Unix ms),
-- on behalf of buyer ARGV[4] ('' for none) within its limit ARGV[5] (0: none).
-- KEYS[1] stock hash (its 'ver' counts every change, for the reconcilers), KEYS[2] reservation hash, KEYS[3] live set,
-- KEYS[4] the SKU's buyer holds (buyer -> units reserved or confirmed), valid while the stock hash's 'bv' is 1.
-- KEYS[5] the orders buyers.lua counted into the holds from MySQL alone (no
-- Redis record): a Try of one of them (outbox's recount after a rebuild) is
-- already in its buyer's hold, so it is neither checked against the limit
-- nor counted again.
-- Returns 1 reserved now, 2 already reserved or confirmed (idempotent repeat),
-- 0 out of stock, -2 order already cancelled or expired (anti-hanging),
-- -3 unknown SKU, -4 the buyer's limit would be passed, -5 the buyer holds
-- need building first (buyers.lua; the stock hash was rebuilt or is new).
local st = redis.call('HGET', KEYS[2], 'state')
if st then
  if st == 'reserved' or st == 'confirmed' then return 2 end
  return -2
end
local avail = tonumber(redis.call('HGET', KEYS[1], 'available'))
if avail == nil then return -3 end
local q = tonumber(ARGV[1])
local buyer = ARGV[4] or ''
local counted = false
if buyer ~= '' then
  if redis.call('HGET', KEYS[1], 'bv') ~= '1' then return -5 end
  counted = KEYS[5] ~= nil and redis.call('SISMEMBER', KEYS[5], ARGV[3]) == 1
  local lim = tonumber(ARGV[5]) or 0
  if not counted and lim > 0 and (tonumber(redis.call('HGET', KEYS[4], buyer)) or 0) + q > lim then return -4 end
end
if avail < q then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -q)
redis.call('HINCRBY', KEYS[1], 'occupied', q)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[2], 'qty', q, 'state', 'reserved', 'deadline', ARGV[2])
if buyer ~= '' then
  redis.call('HSET', KEYS[2], 'buyer', buyer)
  if counted then
    redis.call('SREM', KEYS[5], ARGV[3])
  else
    redis.call('HINCRBY', KEYS[4], buyer, q)
  end
end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1
