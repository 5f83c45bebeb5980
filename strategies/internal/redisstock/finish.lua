-- Finish: move order ARGV[2]'s reservation to state ARGV[1]
-- (confirmed | cancelled | expired).
-- KEYS[1] stock hash, KEYS[2] reservation hash, KEYS[3] live set, KEYS[4] buyer
-- holds (a cancel or expiry gives the reservation's buyer its units back).
-- ARGV[3] retention of the final record (ms); ARGV[4] '1' to leave a
-- cancelled marker when there is no reservation (null compensation).
-- Owner check: stock moves only while this order's own reservation is still
-- 'reserved'; any other state leaves stock untouched, so a late or repeated
-- cancel can never hand a unit out twice.
-- Returns the state found before: '' none, 'reserved' moved now, or a final
-- state; 'nohash' when the reservation is live but the stock hash is missing.
local st = redis.call('HGET', KEYS[2], 'state')
local to = ARGV[1]
if not st then
  if ARGV[4] == '1' then
    redis.call('HSET', KEYS[2], 'qty', 0, 'state', to)
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return ''
end
if st ~= 'reserved' then return st end
local q = tonumber(redis.call('HGET', KEYS[2], 'qty'))
-- Without a stock hash (Redis lost it, or a rebuild is under way) nothing
-- moves: the reload counts the reservation as MySQL decided it when it
-- read MySQL, or as still held, and the decision is applied to the new
-- hash later (recovery, reconciler). Moving only the reservation here
-- would let it fall out of both counts.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'nohash' end
redis.call('HINCRBY', KEYS[1], 'occupied', -q)
if to == 'confirmed' then
  redis.call('HINCRBY', KEYS[1], 'sold', q)
else
  redis.call('HINCRBY', KEYS[1], 'available', q)
  local b = redis.call('HGET', KEYS[2], 'buyer')
  if b and redis.call('HGET', KEYS[1], 'bv') == '1' then
    if redis.call('HINCRBY', KEYS[4], b, -q) <= 0 then redis.call('HDEL', KEYS[4], b) end
  end
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
redis.call('HSET', KEYS[2], 'state', to)
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[2])
return st
