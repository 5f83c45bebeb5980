-- Buyers: build a SKU's buyer holds (KEYS[3]: buyer -> units reserved or
-- confirmed) at one instant, once its stock hash (KEYS[1]) exists but has
-- no valid holds (no 'bv' field: the hash is new or was rebuilt after
-- Redis lost data). KEYS[2] live set. ARGV[1] the prefix of the SKU's
-- reservation keys, ARGV[2] how long (ms) KEYS[5] is kept, then triples
-- (order id, buyer, qty) of the orders MySQL holds as reserved or
-- confirmed with a buyer. KEYS[5] gets the orders counted from MySQL
-- alone (no Redis record), so that a later Try of one of them (outbox's
-- recount after a rebuild) does not count it twice (try.lua).
-- A reservation Redis records counts as its record says (reserved or
-- confirmed: held; cancelled or expired: not), and gets its buyer from
-- MySQL if it lacks one (a reservation rebuild.lua recorded), so a later
-- cancel gives the units back; an order Redis has no record of counts as
-- MySQL says (a confirmed record past its retention); a live reservation
-- MySQL does not know yet (lua-tcc's Try) counts by its own record. While
-- 'bv' is missing no Try of a buyer runs and no Finish touches the holds,
-- so the count cannot miss a change. KEYS[4] is the set of reservations
-- live when the hash was rebuilt (rebuild.lua): no reservation with a
-- buyer is made after that until the holds are built, so every hold MySQL
-- had not seen when it was read is a member, or still live; a member
-- decided since counts by its record (a confirm landing between the MySQL
-- read and this script is in neither the read nor the live set, and would
-- otherwise be missed). The set is dropped once the holds are built.
-- Returns 1 built, 0 already valid, -3 no stock hash.
if redis.call('EXISTS', KEYS[1]) == 0 then return -3 end
if redis.call('HGET', KEYS[1], 'bv') == '1' then return 0 end
redis.call('DEL', KEYS[3], KEYS[5])
local p = ARGV[1]
local seen, held = {}, {}
local i = 3
while i + 2 <= #ARGV do
  local id, b, q = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  i = i + 3
  seen[id] = true
  local r = redis.call('HMGET', p .. id, 'state', 'buyer', 'qty')
  if r[1] == 'reserved' or r[1] == 'confirmed' then
    if not r[2] then redis.call('HSET', p .. id, 'buyer', b) end
    held[b] = (held[b] or 0) + (tonumber(r[3]) or q)
  elseif not r[1] then
    held[b] = (held[b] or 0) + q
    redis.call('SADD', KEYS[5], id)
  end
end
local function own(id)
  if seen[id] then return end
  seen[id] = true
  local r = redis.call('HMGET', p .. id, 'state', 'buyer', 'qty')
  if (r[1] == 'reserved' or r[1] == 'confirmed') and r[2] then
    held[r[2]] = (held[r[2]] or 0) + (tonumber(r[3]) or 0)
  end
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do own(id) end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do own(id) end
redis.call('DEL', KEYS[4])
for b, n in pairs(held) do
  if n > 0 then redis.call('HSET', KEYS[3], b, n) end
end
if redis.call('EXISTS', KEYS[5]) == 1 then redis.call('PEXPIRE', KEYS[5], ARGV[2]) end
redis.call('HSET', KEYS[1], 'bv', 1)
return 1
