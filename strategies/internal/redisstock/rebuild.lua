-- Rebuild: build a missing stock hash from MySQL's word, at one instant.
-- KEYS[1] stock hash, KEYS[2] live set, KEYS[3] set of applied restock versions,
-- KEYS[4] the set of reservations live at the rebuild, which buyers.lua
-- counts the buyer holds over (see there).
-- ARGV[1] MySQL total, ARGV[2] MySQL confirmed units, ARGV[3] MySQL inventory
-- version (the restocks the total includes: the new floor), ARGV[4] the
-- prefix of the SKU's reservation keys (same hash tag, same Cluster slot),
-- ARGV[5] retention of a final record (ms), ARGV[6] n, then n pairs
-- (order id, final state MySQL holds for it), then triples (order id, qty,
-- deadline ms) of the orders MySQL holds as reserved.
-- MySQL's decisions are given to the live reservations still reserved (no
-- stock moves: there is no hash yet); a reservation MySQL holds that Redis
-- has no record of is recorded; occupied is what the live reservations
-- hold now; available the rest.
-- Returns 1 built, 0 a hash exists (nothing changed), -1 available < 0.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local p = ARGV[4]
local n = tonumber(ARGV[6])
local i = 7
for _ = 1, n do
  local id, st = ARGV[i], ARGV[i + 1]
  i = i + 2
  if redis.call('HGET', p .. id, 'state') == 'reserved' then
    redis.call('HSET', p .. id, 'state', st)
    redis.call('PEXPIRE', p .. id, ARGV[5])
    redis.call('ZREM', KEYS[2], id)
  end
end
while i + 2 <= #ARGV do
  local id, q, d = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  i = i + 3
  if redis.call('EXISTS', p .. id) == 0 then
    redis.call('HSET', p .. id, 'qty', q, 'state', 'reserved', 'deadline', d)
    redis.call('ZADD', KEYS[2], d, id)
  end
end
local occ = 0
redis.call('DEL', KEYS[4])
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local r = redis.call('HMGET', p .. id, 'qty', 'state')
  if r[2] == 'reserved' then
    occ = occ + tonumber(r[1])
    redis.call('SADD', KEYS[4], id)
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
local total, sold = tonumber(ARGV[1]), tonumber(ARGV[2])
local avail = total - sold - occ
if avail < 0 then return -1 end
redis.call('HSET', KEYS[1], 'total', total, 'available', avail, 'occupied', occ, 'sold', sold, 'ver', 1, 'rv', ARGV[3], 'gen', table.concat(redis.call('TIME'), '.'))
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[3])
return 1
