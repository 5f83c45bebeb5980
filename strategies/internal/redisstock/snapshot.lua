-- Snapshot: one SKU's Redis side, read atomically.
-- KEYS[1] stock hash, KEYS[2] live set. ARGV[1] the prefix of the SKU's
-- reservation keys (same hash tag, so the same Cluster slot); ARGV[2..],
-- optional, order ids an earlier Snapshot saw live.
-- Returns {exists, total, available, occupied, sold, ver, rv, gen, confirmed, id1, qty1, id2, qty2, ...}
-- with exists 0 (and no more) when the stock hash is missing; confirmed is
-- the units of the ARGV orders whose reservation is now 'confirmed' (the
-- confirms Redis counted of them since that Snapshot); the ids are the
-- live set's members whose reservation is still 'reserved'; gen names the
-- hash's generation (see sold.lua).
local h = redis.call('HMGET', KEYS[1], 'total', 'available', 'occupied', 'sold', 'ver', 'rv', 'gen')
if not h[1] then return {0} end
local confirmed = 0
for i = 2, #ARGV do
  local r = redis.call('HMGET', ARGV[1] .. ARGV[i], 'qty', 'state')
  if r[2] == 'confirmed' then confirmed = confirmed + tonumber(r[1]) end
end
local out = {1, h[1], h[2], h[3], h[4], h[5] or '0', h[6] or '0', h[7] or '', confirmed}
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local r = redis.call('HMGET', ARGV[1] .. id, 'qty', 'state')
  if r[2] == 'reserved' then
    out[#out + 1] = id
    out[#out + 1] = r[1]
  end
end
return out
