-- lua-split's rebuild of one shard of a SKU from MySQL (fence.go), at one
-- instant of the shard: MySQL's decisions are given to the shard's live
-- reservations that missed them, occupied is counted from the reservations
-- still live then, and the stock hash is written anew: sold ARGV[2] (the
-- units of MySQL's confirmed orders whose record is in this shard, or that
-- fence.go placed here), available ARGV[3] (this shard's share of the rest),
-- total their sum with occupied.
-- KEYS[1] stock hash, KEYS[2] live set, KEYS[3] buyer holds (dropped: the
-- limit is the allowance's). ARGV[1] the shard's reservation key prefix,
-- ARGV[4] the MySQL inventory version the hash includes (restock floor),
-- ARGV[5] a final record's retention (ms), then order id and state pairs.
-- Returns occupied.
local pre = ARGV[1]
for i = 6, #ARGV, 2 do
  local rk = pre .. ARGV[i]
  if redis.call('HGET', rk, 'state') == 'reserved' then
    redis.call('HSET', rk, 'state', ARGV[i + 1])
    redis.call('PEXPIRE', rk, ARGV[5])
    redis.call('ZREM', KEYS[2], ARGV[i])
  end
end
local occ = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local rk = pre .. id
  if redis.call('HGET', rk, 'state') == 'reserved' then
    occ = occ + tonumber(redis.call('HGET', rk, 'qty'))
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
local sold, avail = tonumber(ARGV[2]), tonumber(ARGV[3])
local ver = tonumber(redis.call('HGET', KEYS[1], 'ver') or '0') + 1
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('HSET', KEYS[1], 'total', sold + occ + avail, 'available', avail, 'occupied', occ, 'sold', sold,
  'ver', ver, 'rv', ARGV[4], 'bv', 1)
return occ
