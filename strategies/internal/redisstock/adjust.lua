-- Adjust: the reconcilers' guarded repair of one SKU's stock hash.
-- KEYS[1] stock hash, KEYS[2] its set of applied restock versions.
-- ARGV[1] the 'ver' observed ('' when the hash was observed missing),
-- ARGV[2..5] deltas (missing hash: values) of total, available, occupied, sold,
-- ARGV[6..9] the values of those fields observed with that version,
-- ARGV[10] the MySQL inventory version the repaired hash includes (its
-- restocks: see restock.lua), or '' to leave it; it becomes the floor.
-- The change applies only if the hash is still exactly as observed (same
-- version, or still missing): a write that raced the observation makes the
-- repair a no-op, to be judged again on a later pass. Never a blind overwrite.
-- Returns 1 applied, 0 the hash changed since it was observed.
local f = {'total', 'available', 'occupied', 'sold'}
if ARGV[1] == '' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('HSET', KEYS[1], f[1], ARGV[2], f[2], ARGV[3], f[3], ARGV[4], f[4], ARGV[5], 'ver', 1, 'gen', table.concat(redis.call('TIME'), '.'))
  if ARGV[10] ~= '' then
    redis.call('HSET', KEYS[1], 'rv', ARGV[10])
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[10])
  end
  return 1
end
local v = redis.call('HGET', KEYS[1], 'ver') or '0'
if v ~= ARGV[1] then return 0 end
local cur = redis.call('HMGET', KEYS[1], f[1], f[2], f[3], f[4])
for i = 1, 4 do
  if cur[i] ~= ARGV[i + 5] then return 0 end
end
for i = 1, 4 do
  if tonumber(ARGV[i + 1]) ~= 0 then redis.call('HINCRBY', KEYS[1], f[i], ARGV[i + 1]) end
end
if ARGV[10] ~= '' then
  redis.call('HSET', KEYS[1], 'rv', ARGV[10])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[10])
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return 1
