-- lua-split's per-buyer allowance, kept in the shard the buyer hashes to
-- (its own hash tag: one slot), apart from the stock shards a reserve
-- walks: KEYS[1] buyer -> units allowed out (reserved or confirmed),
-- KEYS[2] order -> "buyer qty" of each order holding allowance.
-- ARGV[1] 'take' or 'give', ARGV[2] order id, ARGV[3] buyer, ARGV[4] qty,
-- ARGV[5] limit.
-- take: 2 the order holds its allowance already (a repeat), -4 the buyer's
-- limit would be passed, 1 taken now. give: 1 given back, 0 the order held
-- none (a repeat, or an order without a limit).
if ARGV[1] == 'take' then
  if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return 2 end
  local q = tonumber(ARGV[4])
  if (tonumber(redis.call('HGET', KEYS[1], ARGV[3])) or 0) + q > tonumber(ARGV[5]) then return -4 end
  redis.call('HINCRBY', KEYS[1], ARGV[3], q)
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. ' ' .. q)
  return 1
end
local v = redis.call('HGET', KEYS[2], ARGV[2])
if not v then return 0 end
local b, q = string.match(v, '^(.*) (%d+)$')
redis.call('HDEL', KEYS[2], ARGV[2])
if redis.call('HINCRBY', KEYS[1], b, -tonumber(q)) <= 0 then redis.call('HDEL', KEYS[1], b) end
return 1
