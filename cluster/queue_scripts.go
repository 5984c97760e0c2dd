package cluster

import "github.com/redis/go-redis/v9"

// The shared webhook queue's Redis data, under <prefix>{queue:<name>}: (the
// base, passed to scripts that name per-organization keys; one hash tag,
// so that every script runs on a Redis Cluster):
//
//	seq        INCR counter numbering the deliveries
//	epoch      random prefix of the delivery IDs, set with the first delivery
//	pending    HASH  delivery ID → Meta JSON (attempts, next attempt, last answer)
//	age        ZSET  delivery ID scored by its received time (ms), for depth and oldest age
//	ready      ZSET  organization scored by when its head may be taken (ms):
//	           present exactly when the organization has deliveries; while an
//	           instance holds its lease, scored at the lease's end
//	s:<org>    STREAM of the organization's deliveries in received order,
//	           fields id and p (headers and body as queue.EncodePayload packs
//	           them), read through the consumer group "deliver"
//	l:<org>    STRING lease: the consumer delivering the organization's head
//	d:<sha256> STRING a delivery seen within the dedup window
//	t:<token>  STRING the ID an add call gave, for a minute (a resent call gets it again)
//	dead       HASH  delivery ID → Meta JSON of a dead letter
//	deadp      HASH  delivery ID → its payload
//
// Every script runs atomically, so the invariants between these keys hold
// whatever instances do at the same time or die in between.

// queueAddScript stores one delivery: dedup check, then ID, stream entry,
// metadata, age and the organization's place in ready. The ID is the
// queue's epoch and the delivery's sequence number; a Redis that lost the
// queue's keys (restarted without persistence) starts a new epoch, so IDs
// are never given twice.
//
// The call's token key remembers the ID for a minute, so that the same
// call run again (resent after its answer was lost) stores nothing twice.
// Such a call and a duplicate still write (they touch the key that
// found them), so that a WAIT after them (Options.Replicas) confirms the
// first call's write too: replication keeps the primary's order.
//
//	KEYS: seq pending age ready stream dedup epoch token
//	ARGV: epoch-if-none meta payload now-ms dedup-ms org
//
// It returns {ID, due}, due 1 when the organization had no deliveries
// before this one (it is due now, and no instance holds its lease), else
// 0: the instance holding its lease reads this delivery after the ones
// before it, or the organization waits for a retry it is scored at. It
// returns false for a duplicate.
var queueAddScript = redis.NewScript(`
local again = redis.call('GET', KEYS[8])
if again then
  redis.call('PEXPIRE', KEYS[8], 60000)
  return {again, 0}
end
if tonumber(ARGV[5]) > 0 then
  if not redis.call('SET', KEYS[6], '1', 'NX', 'PX', ARGV[5]) then
    redis.call('SET', KEYS[6], '1', 'KEEPTTL')
    return false
  end
end
local epoch = redis.call('GET', KEYS[7])
if not epoch then
  epoch = ARGV[1]
  redis.call('SET', KEYS[7], epoch)
end
local seq = redis.call('INCR', KEYS[1])
local id = epoch .. '-' .. seq
if redis.call('EXISTS', KEYS[5]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[5], 'deliver', '0', 'MKSTREAM')
end
redis.call('XADD', KEYS[5], '*', 'id', id, 'p', ARGV[3])
redis.call('HSET', KEYS[2], id, ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], id)
local due = redis.call('ZADD', KEYS[4], 'NX', ARGV[4], ARGV[6])
redis.call('SET', KEYS[8], id, 'PX', 60000)
return {id, due}
`)

// queueTakeLua defines take, which reads up to n of an organization's
// deliveries after the entry after ('0-0': from its head), in order, for
// the consumer holding its lease, through the consumer group: entries
// still pending (read by a consumer that died, or read ahead before a
// retry or a release) come first, taken over with XAUTOCLAIM, then new
// ones. Only the lease holder reads the stream, so the pending entries
// always come before the new ones. It stops after the entry that brings
// the payloads read to budget bytes; the entries read past it stay
// pending, for the next take. It returns {org, entry, id, meta, payload,
// entry, id, …}, or nil when there is nothing to read.
//
// A stream that never empties would otherwise keep the name of every
// consumer that ever read it (each instance start is a new consumer), so
// a take under a lease just taken (pruning) also removes the group's other
// consumers with nothing pending: only the lease holder reads the stream,
// so they have nothing to do there, and a consumer that reads it again
// later is created anew. The takes that follow under the same lease (see
// queueSettleScript) need not look again.
const queueTakeLua = `
local function prune(stream, consumer)
  local cs = redis.pcall('XINFO', 'CONSUMERS', stream, 'deliver')
  if type(cs) ~= 'table' then return end
  for _, c in ipairs(cs) do
    local name, pending = nil, nil
    for i = 1, #c, 2 do
      if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
    end
    if name and name ~= consumer and pending == 0 then
      redis.pcall('XGROUP', 'DELCONSUMER', stream, 'deliver', name)
    end
  end
end

local function take(org, after, n, budget, consumer, base, pending, pruning)
  local stream = base .. 's:' .. org
  local start = '0-0'
  if after ~= '0-0' then
    local ms, sq = string.match(after, '^(%d+)-(%d+)$')
    start = ms .. '-' .. string.format('%d', tonumber(sq) + 1)
  end
  local es = {}
  local c = redis.pcall('XAUTOCLAIM', stream, 'deliver', consumer, 0, start, 'COUNT', n)
  if type(c) == 'table' and type(c[2]) == 'table' then
    for _, e in ipairs(c[2]) do
      if type(e) == 'table' then es[#es + 1] = e end
    end
  end
  if #es < n then
    local r = redis.pcall('XREADGROUP', 'GROUP', 'deliver', consumer, 'COUNT', n - #es, 'STREAMS', stream, '>')
    if type(r) == 'table' and type(r[1]) == 'table' then
      for _, e in ipairs(r[1][2]) do es[#es + 1] = e end
    end
  end
  if #es == 0 then return nil end
  if pruning then prune(stream, consumer) end
  local out, size = {org}, 0
  for _, e in ipairs(es) do
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
    local p = f['p'] or ''
    out[#out + 1] = e[1]
    out[#out + 1] = f['id']
    out[#out + 1] = redis.call('HGET', pending, f['id']) or ''
    out[#out + 1] = p
    size = size + #p
    if size >= budget then break end
  end
  return out
end
`

// queueClaimScript takes the first due organization whose lease is free:
// the lease is set for the caller, the organization scored at the lease's
// end (hidden from the others until then), and take reads its head and up
// to n-1 deliveries after it. An organization whose lease another
// consumer holds is scored at that lease's end, so that it does not stand
// in front of the others.
//
//	KEYS: ready pending
//	ARGV: now-ms lease-ms consumer base scan n budget
//
// It returns take's {org, entry, id, meta, payload, …}, or {wait-ms} when
// nothing is due (-1: the queue is empty).
var queueClaimScript = redis.NewScript(queueTakeLua + `
local now = tonumber(ARGV[1])
local orgs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, ARGV[5])
for _, org in ipairs(orgs) do
  local lease = ARGV[4] .. 'l:' .. org
  if redis.call('SET', lease, ARGV[3], 'NX', 'PX', ARGV[2]) then
    local t = take(org, '0-0', tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[3], ARGV[4], KEYS[2], true)
    if t then
      redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), org)
      return t
    end
    redis.call('DEL', lease)
    local stream = ARGV[4] .. 's:' .. org
    if redis.call('XLEN', stream) == 0 then
      redis.call('ZREM', KEYS[1], org)
    end
  else
    redis.call('ZADD', KEYS[1], now + math.max(redis.call('PTTL', lease), 1), org)
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if not first[1] then return {-1} end
return {math.max(tonumber(first[2]) - now, 0)}
`)

// queueSettleScript files how attempts of one organization's deliveries
// ended, in the order they were made: each item is a mode, the stream
// entry, the delivery ID and its metadata. Mode "done" removes the
// delivery; "bury" moves it to the dead letters with its payload; "retry"
// records its metadata and scores its organization at the next attempt
// (due), leaving the entry pending in the group for the next claim;
// "release" gives the lease back, the head due at due (an attempt cut
// short by a shutdown). Retry and release end a call's items. Whatever
// the items, the lease and the organization's score are only touched
// while the caller still holds the lease: one that overran it leaves both
// to the instance that took over.
//
// After done and bury items alone, with next set, the caller keeps the
// lease, renewed, and take reads up to n more deliveries after the entry
// after (the last the caller read): the caller sends them while this call
// is on its way, and the next call records them (one call for the
// deliveries that ended while the one before it was on its way, since
// each write waits for Redis' disk when it syncs every write). Without
// next, the lease goes back, the deliveries read and not recorded staying
// pending for the next claim.
//
//	KEYS: ready pending age stream lease dead deadp
//	ARGV: consumer now-ms org due-ms next lease-ms base after n budget, then per item: mode entry id meta
//
// It returns {0} when the lease is let go (or was not the caller's), {1}
// when the caller keeps it, with take's {org, entry, id, meta, payload,
// …} after the 1 when it read any.
var queueSettleScript = redis.NewScript(queueTakeLua + `
local mine = redis.call('GET', KEYS[5]) == ARGV[1]
local last = nil
local entries, ids = {}, {}
for i = 11, #ARGV, 4 do
  local mode, entry, id = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  last = mode
  if mode == 'retry' then
    if redis.call('HEXISTS', KEYS[2], id) == 1 then
      redis.call('HSET', KEYS[2], id, ARGV[i + 3])
    end
  elseif mode ~= 'release' then
    if mode == 'bury' and redis.call('HEXISTS', KEYS[2], id) == 1 then
      local r = redis.pcall('XRANGE', KEYS[4], entry, entry)
      if type(r) == 'table' and r[1] then
        local f = {}
        for j = 1, #r[1][2], 2 do f[r[1][2][j]] = r[1][2][j + 1] end
        redis.call('HSET', KEYS[6], id, ARGV[i + 3])
        redis.call('HSET', KEYS[7], id, f['p'])
      end
    end
    entries[#entries + 1] = entry
    ids[#ids + 1] = id
  end
end
if #entries > 0 then
  redis.pcall('XACK', KEYS[4], 'deliver', unpack(entries))
  redis.pcall('XDEL', KEYS[4], unpack(entries))
  redis.call('HDEL', KEYS[2], unpack(ids))
  redis.call('ZREM', KEYS[3], unpack(ids))
end
local now = tonumber(ARGV[2])
if last == 'retry' or last == 'release' then
  if mine then
    redis.call('DEL', KEYS[5])
    redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
  end
  return {0}
end
if redis.call('XLEN', KEYS[4]) > 0 then
  if mine and ARGV[5] == '1' then
    redis.call('PEXPIRE', KEYS[5], ARGV[6])
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[6]), ARGV[3])
    local n = tonumber(ARGV[9])
    if n > 0 then
      local t = take(ARGV[3], ARGV[8], n, tonumber(ARGV[10]), ARGV[1], ARGV[7], KEYS[2], false)
      if t then
        table.insert(t, 1, 1)
        return t
      end
    end
    return {1}
  end
  if mine then
    redis.call('DEL', KEYS[5])
    redis.call('ZADD', KEYS[1], now, ARGV[3])
  end
else
  if mine then redis.call('DEL', KEYS[5]) end
  redis.call('DEL', KEYS[4])
  redis.call('ZREM', KEYS[1], ARGV[3])
end
return {0}
`)

// queueReviveScript turns a dead letter back into a pending delivery at
// the end of its organization's stream, due now.
//
//	KEYS: dead deadp pending age ready stream
//	ARGV: id meta now-ms org
//
// It returns 0 when there is no such dead letter.
var queueReviveScript = redis.NewScript(`
local p = redis.call('HGET', KEYS[2], ARGV[1])
if not p or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[6]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[6], 'deliver', '0', 'MKSTREAM')
end
redis.call('XADD', KEYS[6], '*', 'id', ARGV[1], 'p', p)
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[5], 'NX', ARGV[3], ARGV[4])
return 1
`)

// queueDropScript removes a dead letter and its payload; 0 when none.
//
//	KEYS: dead deadp
//	ARGV: id
var queueDropScript = redis.NewScript(`
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return n
`)
