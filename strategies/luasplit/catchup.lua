-- lua-split's restock catch-up on one shard (recover, catchUp):
-- ARGV[1] 'floor': raise the shard's restock floor ('rv') to ARGV[2], so a
-- late Redis write of a restock at or below it is skipped (restock.lua);
-- 'add': add ARGV[2] units to total and available (the units of restocks
-- MySQL committed whose Redis writes never landed), once every shard's
-- floor covers them. KEYS[1] the shard's stock hash. Returns 1 done, 0
-- nothing to do, -3 no hash.
if redis.call('EXISTS', KEYS[1]) == 0 then return -3 end
local v = tonumber(ARGV[2])
if ARGV[1] == 'floor' then
  if v <= tonumber(redis.call('HGET', KEYS[1], 'rv') or '0') then return 0 end
  redis.call('HSET', KEYS[1], 'rv', v)
  return 1
end
redis.call('HINCRBY', KEYS[1], 'total', v)
redis.call('HINCRBY', KEYS[1], 'available', v)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return 1
