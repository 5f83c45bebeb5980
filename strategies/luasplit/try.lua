-- lua-split's Try on one shard of a SKU: try.lua's reserve (without the
-- buyer-hold recount a rebuild leaves, which this strategy never makes),
-- plus the shard's pass marker. ARGV[1] qty, ARGV[2] deadline (Unix ms),
-- ARGV[3] order id, ARGV[4] buyer ('' for none), ARGV[5] its limit (0:
-- none), ARGV[6] '1' when the reserve moves on to the next shard on a
-- refusal, ARGV[7] the marker's life (ms), ARGV[8] this walk's token.
-- KEYS[1] the shard's stock hash, KEYS[2] the order's reservation hash,
-- KEYS[3] live set, KEYS[4] buyer holds, KEYS[5] the order's pass marker:
-- the set of the walks' tokens that passed here (all under the shard's
-- hash tag: one slot). A walk that passes a marked shard adds its token
-- too, and one that ends refused everywhere removes its own token from
-- each shard it passed (it holds nothing), so a marker stays while any
-- walk that passed it may hold a unit further on.
-- The pass marker makes the order's path through the shards the same for
-- every try of it: a shard that refused the order and let it move on
-- marks it, and refuses it again (3) even once units came back, so a
-- repeated Try (a lost reply) walks on to the shard that holds its unit
-- instead of reserving a second one here.
-- Returns 1 reserved now, 2 already reserved or confirmed here, 0 out of
-- stock, 3 passed here before (move on), -2 cancelled or expired,
-- -3 no stock hash, -4 the buyer's limit, -5 buyer holds not built.
local st = redis.call('HGET', KEYS[2], 'state')
if st then
  if st == 'reserved' or st == 'confirmed' then return 2 end
  return -2
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  redis.call('SADD', KEYS[5], ARGV[8])
  redis.call('PEXPIRE', KEYS[5], ARGV[7])
  return 3
end
local avail = tonumber(redis.call('HGET', KEYS[1], 'available'))
if avail == nil then return -3 end
local q = tonumber(ARGV[1])
local buyer = ARGV[4] or ''
if buyer ~= '' then
  if redis.call('HGET', KEYS[1], 'bv') ~= '1' then return -5 end
  local lim = tonumber(ARGV[5]) or 0
  if lim > 0 and (tonumber(redis.call('HGET', KEYS[4], buyer)) or 0) + q > lim then return -4 end
end
if avail < q then
  if ARGV[6] == '1' then
    redis.call('SADD', KEYS[5], ARGV[8])
    redis.call('PEXPIRE', KEYS[5], ARGV[7])
  end
  return 0
end
redis.call('HINCRBY', KEYS[1], 'available', -q)
redis.call('HINCRBY', KEYS[1], 'occupied', q)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[2], 'qty', q, 'state', 'reserved', 'deadline', ARGV[2])
if buyer ~= '' then
  redis.call('HSET', KEYS[2], 'buyer', buyer)
  redis.call('HINCRBY', KEYS[4], buyer, q)
end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1
