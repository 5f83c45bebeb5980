-- Apply: bring Redis in line with one row of ensure's stock-change log,
-- idempotently by order id: ARGV[1] the row's kind ('confirm' | 'refund'),
-- ARGV[2] the order id, ARGV[3] retention of the final record (ms).
-- KEYS[1] stock hash, KEYS[2] the order's reservation hash, KEYS[3] live set,
-- KEYS[4] buyer holds (a refund gives the buyer its units back).
-- The reservation record's state is the idempotency key: a kind moves stock
-- only from the state it expects, and leaves the state it moved to, so a
-- second apply of the same row (a retry, a second worker) changes nothing.
-- Returns:
--   'moved'  stock moved now;
--   'marked' (refund) the record was confirmed under another generation of
--            the hash (a rebuild or a sold correction since): the record is
--            marked refunded and the counts are left to the sold correction,
--            which sees MySQL's sold at one instant;
--   'none'   no record (Redis lost it): nothing to move here, the rebuild or
--            the sold correction counts the order as MySQL decided it;
--   'nohash' the stock hash is missing (a rebuild is under way): try later;
--   else the state found, which the row does not move (already applied).
local st = redis.call('HGET', KEYS[2], 'state')
if not st then return 'none' end
local kind = ARGV[1]
if kind == 'confirm' then
  if st ~= 'reserved' then return st end
elseif kind == 'refund' then
  if st ~= 'reserved' and st ~= 'confirmed' then return st end
else
  return redis.error_reply('apply: unknown kind ' .. tostring(kind))
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 'nohash' end
local q = tonumber(redis.call('HGET', KEYS[2], 'qty'))
local gen = redis.call('HGET', KEYS[1], 'gen') or ''
local out = 'moved'
if kind == 'confirm' then
  redis.call('HINCRBY', KEYS[1], 'occupied', -q)
  redis.call('HINCRBY', KEYS[1], 'sold', q)
  -- The hash generation that counted the sale: a refund moves the units
  -- back only while the hash is still that one.
  redis.call('HSET', KEYS[2], 'state', 'confirmed', 'cg', gen)
else
  if st == 'reserved' then
    -- The confirm's row has not been applied yet: the units go straight
    -- from occupied back to available, and that row then finds 'refunded'.
    redis.call('HINCRBY', KEYS[1], 'occupied', -q)
    redis.call('HINCRBY', KEYS[1], 'available', q)
  elseif redis.call('HGET', KEYS[2], 'cg') == gen then
    redis.call('HINCRBY', KEYS[1], 'sold', -q)
    redis.call('HINCRBY', KEYS[1], 'available', q)
  else
    out = 'marked'
  end
  if out == 'moved' then
    local b = redis.call('HGET', KEYS[2], 'buyer')
    if b and redis.call('HGET', KEYS[1], 'bv') == '1' then
      if redis.call('HINCRBY', KEYS[4], b, -q) <= 0 then redis.call('HDEL', KEYS[4], b) end
    end
  end
  redis.call('HSET', KEYS[2], 'state', 'refunded')
end
if out == 'moved' then redis.call('HINCRBY', KEYS[1], 'ver', 1) end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[2])
return out
