package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// servicegate 0.1.0 kept a shared queue under <prefix>queue:<name>:…, the
// keys of the current layout without their hash tag (they gained it so that
// a queue runs on a Redis Cluster, where the earlier keys, on several
// nodes, never held a delivery: no script of the queue ran there). The
// data under each key is as it is now (see queue_scripts.go).

// earlierQueueBase is the start of every key of the queue called name in
// the earlier layout.
func (c *Client) earlierQueueBase(name string) string { return c.prefix + queueKeys + name + ":" }

// moveBatch bounds the deliveries (each up to a whole body) and the dead
// letters one call of queueMoveScript moves, so that no call holds Redis
// for long.
const moveBatch = 32

// queueMoveScript moves a batch of what the earlier layout holds into the
// current one: up to ARGV[3] deliveries from the head of the first
// organization's stream, to the end of its stream in the current layout,
// with their metadata, received time and IDs (the app deduplicates by the
// ID, which a delivery may have been sent under already); then up to as
// many dead letters, from the dead letters' scan at ARGV[5]. Each call is
// atomic and removes what it moved, so that instances starting together
// move each delivery once, and one organization's deliveries keep their
// order. A delivery an instance of the earlier version was sending is
// moved too, and may reach the app twice (at least once, as after a
// crash). The earlier IDs' epoch is not taken along: the current layout's
// IDs, of an epoch of their own, never equal them.
//
//	KEYS: earlier-ready earlier-dead ready
//	ARGV: earlier-base base batch now-ms dead-cursor
//
// It returns {deliveries moved, dead letters moved, organizations done,
// next dead cursor, what is left: organizations + dead letters}.
var queueMoveScript = redis.NewScript(`
local old, new, batch, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local moved, dead, done = 0, 0, 0
local org = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if org then
  local src, dst = old .. 's:' .. org, new .. 's:' .. org
  local entries = redis.pcall('XRANGE', src, '-', '+', 'COUNT', batch)
  if type(entries) == 'table' and #entries > 0 then
    if redis.call('EXISTS', dst) == 0 then
      redis.call('XGROUP', 'CREATE', dst, 'deliver', '0', 'MKSTREAM')
    end
    for _, e in ipairs(entries) do
      local f = {}
      for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
      local id = f['id']
      redis.call('XADD', dst, '*', 'id', id, 'p', f['p'])
      local meta = redis.call('HGET', old .. 'pending', id)
      if meta then redis.call('HSET', new .. 'pending', id, meta) end
      redis.call('ZADD', new .. 'age', redis.call('ZSCORE', old .. 'age', id) or now, id)
      redis.call('HDEL', old .. 'pending', id)
      redis.call('ZREM', old .. 'age', id)
      redis.call('XDEL', src, e[1])
      moved = moved + 1
    end
    redis.call('ZADD', KEYS[3], 'NX', now, org)
  end
  if #entries < batch then
    redis.call('DEL', src, old .. 'l:' .. org)
    redis.call('ZREM', KEYS[1], org)
    done = 1
  end
end
local scan = redis.call('HSCAN', KEYS[2], ARGV[5], 'COUNT', batch)
for i = 1, #scan[2], 2 do
  local id = scan[2][i]
  redis.call('HSETNX', new .. 'dead', id, scan[2][i + 1])
  local p = redis.call('HGET', old .. 'deadp', id)
  if p then redis.call('HSETNX', new .. 'deadp', id, p) end
  redis.call('HDEL', KEYS[2], id)
  redis.call('HDEL', old .. 'deadp', id)
  dead = dead + 1
end
local left = redis.call('ZCARD', KEYS[1]) + redis.call('HLEN', KEYS[2])
if left == 0 then
  redis.call('DEL', old .. 'seq', old .. 'epoch', old .. 'deadp')
end
return {moved, dead, done, scan[1], left}
`)

// moveEarlier moves what the earlier layout holds of this queue into the
// current layout, a batch per call, until nothing is left (or what is
// left came in during its last pass: an instance of the earlier version
// still running), and returns how many deliveries and dead letters it
// moved. On a Redis Cluster there is nothing to move.
func (q *Queue) moveEarlier(ctx context.Context) (deliveries, dead int, err error) {
	if _, ok := q.c.rdb.(*redis.ClusterClient); ok {
		return 0, 0, nil
	}
	old := q.c.earlierQueueBase(q.qo.Name)
	cursor := "0"
	for {
		var reply []any
		err := q.c.Call(ctx, OpQueueAdmin, func(ctx context.Context) error {
			var err error
			reply, err = queueMoveScript.Run(ctx, q.c.rdb, []string{old + "ready", old + "dead", q.key("ready")},
				old, q.base, moveBatch, q.opts.Now().UnixMilli(), cursor).Slice()
			return err
		})
		if err != nil {
			return deliveries, dead, fmt.Errorf("webhook queue: moving the deliveries of the earlier Redis keys %s…: %w", old, err)
		}
		if len(reply) != 5 {
			return deliveries, dead, errors.New("webhook queue: unexpected reply moving the earlier Redis keys")
		}
		n, _ := reply[0].(int64)
		d, _ := reply[1].(int64)
		done, _ := reply[2].(int64)
		cursor, _ = reply[3].(string)
		left, _ := reply[4].(int64)
		deliveries, dead = deliveries+int(n), dead+int(d)
		if left == 0 || (n == 0 && d == 0 && done == 0 && cursor == "0") {
			return deliveries, dead, nil
		}
	}
}
