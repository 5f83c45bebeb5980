-- Recheck: one SKU's Redis side again, for CorrectSold's check of a
-- difference it computed from an earlier Snapshot.
-- KEYS[1] stock hash, KEYS[2] live set. ARGV[1] the prefix of the SKU's
-- reservation keys (same hash tag, so the same Cluster slot); ARGV[2..] the
-- order ids the earlier Snapshot saw live.
-- Returns {exists, sold, gen, confirmed, id1, qty1, id2, qty2, ...} with
-- exists 0 (and no more) when the stock hash is missing; confirmed is the
-- units of the ARGV orders whose reservation is now 'confirmed' (their
-- Redis confirms since the Snapshot), the ids those live now, as Snapshot.
local h = redis.call('HMGET', KEYS[1], 'sold', 'gen')
if not h[1] then return {0} end
local confirmed = 0
for i = 2, #ARGV do
  local r = redis.call('HMGET', ARGV[1] .. ARGV[i], 'qty', 'state')
  if r[2] == 'confirmed' then confirmed = confirmed + tonumber(r[1]) end
end
local out = {1, h[1], h[2] or '', confirmed}
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local r = redis.call('HMGET', ARGV[1] .. id, 'qty', 'state')
  if r[2] == 'reserved' then
    out[#out + 1] = id
    out[#out + 1] = r[1]
  end
end
return out
