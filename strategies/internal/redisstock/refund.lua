-- Refund: give order ARGV[2]'s sold units back to available, once.
-- KEYS[1] stock hash, KEYS[2] reservation hash, KEYS[3] live set, KEYS[4]
-- buyer holds (a refund gives the buyer its units back, as a release does),
-- KEYS[5] the SKU's refunds in flight (BeginRefund), from which this
-- attempt's mark ARGV[4] ('' none) is removed whatever happens: its refund
-- is no longer in flight.
-- ARGV[1] mode: 'decide' when this script makes the decision (Redis is
-- where the order's state is decided: outbox-local), 'apply' when the
-- refund is already durable elsewhere (MySQL: lua-tcc, outbox) and Redis is
-- brought in line. ARGV[3] retention of the record (ms).
-- The "already released" check: stock moves only while the order's own
-- record says 'confirmed' (and, in 'apply' mode, 'reserved': a confirm
-- whose Redis write was deferred, then refunded — its units leave
-- occupied); the record then says 'refunded', so a repeat, a racing
-- refund or a cancel can never release the units again.
-- Returns the state found before ('' none: nothing moved), or 'nohash'.
if ARGV[4] ~= '' then redis.call('ZREM', KEYS[5], ARGV[4]) end
local st = redis.call('HGET', KEYS[2], 'state')
if not st then return '' end
local from
if st == 'confirmed' then
  from = 'sold'
elseif st == 'reserved' and ARGV[1] == 'apply' then
  from = 'occupied'
else
  return st
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 'nohash' end
local q = tonumber(redis.call('HGET', KEYS[2], 'qty'))
redis.call('HINCRBY', KEYS[1], from, -q)
redis.call('HINCRBY', KEYS[1], 'available', q)
local b = redis.call('HGET', KEYS[2], 'buyer')
if b and redis.call('HGET', KEYS[1], 'bv') == '1' then
  if redis.call('HINCRBY', KEYS[4], b, -q) <= 0 then redis.call('HDEL', KEYS[4], b) end
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
-- A new generation: a sold correction (sold.lua) computed before this
-- write, which may count this refund already, no longer applies.
local g = redis.call('HGET', KEYS[1], 'gen') or ''
local n = table.concat(redis.call('TIME'), '.')
if n == g then n = g .. '+' end
redis.call('HSET', KEYS[1], 'gen', n)
redis.call('HSET', KEYS[2], 'state', 'refunded')
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[2])
return st
