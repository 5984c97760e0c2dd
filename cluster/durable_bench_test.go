package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/servicegate/servicegate/cluster/redistest"
)

// benchWriteScript is a small write of the size of the queue's add: a hash
// field and a sorted-set member.
var benchWriteScript = redis.NewScript(`redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[1])
return 1`)

// BenchmarkDurableWrites is the durable writes of concurrent callers (32 on
// 2 cores) against a primary and its replica, both syncing their
// append-only files before every answer, as the bench's queue chains run
// them: with replicas 0 (the primary's answer) and replicas 1 (the
// rounds' WAIT). Both have the replica, so that the difference is the
// wait alone, without Caddy or a load generator on the same cores. ns/op
// is the time per write at that concurrency; p50-ms each write's median.
func BenchmarkDurableWrites(b *testing.B) {
	primary := redistest.Start(b)
	replica := primary.StartReplica(b)
	for _, s := range []*redistest.Server{primary, replica} {
		for _, kv := range [][2]string{{"appendonly", "yes"}, {"appendfsync", "always"}} {
			if _, err := s.Do("CONFIG", "SET", kv[0], kv[1]); err != nil {
				b.Fatal(err)
			}
		}
	}
	// CONFIG SET appendonly starts a rewrite; the writes sync only once it is done.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, _ := primary.Do("INFO", "persistence")
		r, _ := replica.Do("INFO", "persistence")
		if busy := p + r; !strings.Contains(busy, "aof_rewrite_in_progress:1") && !strings.Contains(busy, "aof_rewrite_scheduled:1") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the append-only files were not written within 10s")
		}
	}
	var seq atomic.Int64
	for _, replicas := range []int{0, 1} {
		b.Run(fmt.Sprintf("replicas%d", replicas), func(b *testing.B) {
			c, err := New(Options{URL: primary.URL(), Replicas: replicas, ReplicasTimeout: 5 * time.Second, Timeout: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var mu sync.Mutex
			var took []time.Duration
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					id := strconv.FormatInt(seq.Add(1), 10)
					start := time.Now()
					if _, err := c.durable(context.Background(), OpQueueAdd, "bench", benchWriteScript,
						[]string{"bench:p", "bench:r"}, id, "a payload of a few dozen bytes, as a delivery's metadata", id); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				took = append(took, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			if len(took) > 0 {
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
			}
		})
	}
}
