-- lua-split's per-buyer allowance, kept in the shard the buyer hashes to
-- (its own hash tag: one slot), apart from the stock shards a reserve
-- walks: KEYS[1] buyer -> units allowed out (reserved or confirmed),
-- KEYS[2] order -> "buyer qty" of each order holding allowance, KEYS[3]
-- the order's walks in flight that hold it (their tokens).
-- ARGV[1] 'take', 'drop' or 'give', ARGV[2] order id, ARGV[3] buyer,
-- ARGV[4] qty, ARGV[5] limit, ARGV[6] the walk's token, ARGV[7] the
-- tokens' life (ms).
-- take (before a walk): 2 the order holds its allowance already (a repeat,
-- or a walk of it under way elsewhere), -4 the buyer's limit would be
-- passed, 1 taken now; either way the walk's token joins the holders.
-- drop (a walk that ends holding nothing): the token leaves; the units go
-- back only when no other walk of the order holds them, and only if the
-- order's units were not kept by a walk that reserved (which does not
-- drop). give (the order was cancelled, expired or refunded): the units
-- go back. Returns 1 given back, 0 not.
local function release()
  local v = redis.call('HGET', KEYS[2], ARGV[2])
  if not v then return 0 end
  local b, q = string.match(v, '^(.*) (%d+)$')
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[3])
  if redis.call('HINCRBY', KEYS[1], b, -tonumber(q)) <= 0 then redis.call('HDEL', KEYS[1], b) end
  return 1
end
if ARGV[1] == 'take' then
  local r = 2
  if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 0 then
    local q = tonumber(ARGV[4])
    if (tonumber(redis.call('HGET', KEYS[1], ARGV[3])) or 0) + q > tonumber(ARGV[5]) then return -4 end
    redis.call('HINCRBY', KEYS[1], ARGV[3], q)
    redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. ' ' .. q)
    redis.call('DEL', KEYS[3])
    r = 1
  end
  redis.call('SADD', KEYS[3], ARGV[6])
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  return r
end
if ARGV[1] == 'drop' then
  -- 'kept': a walk of the order reserved; its units stay out.
  if redis.call('SREM', KEYS[3], ARGV[6]) == 0 or redis.call('SISMEMBER', KEYS[3], 'kept') == 1 then return 0 end
  if redis.call('SCARD', KEYS[3]) > 0 then return 0 end
  return release()
end
if ARGV[1] == 'keep' then
  redis.call('SREM', KEYS[3], ARGV[6])
  redis.call('SADD', KEYS[3], 'kept')
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
  return 1
end
return release()
