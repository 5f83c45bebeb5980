package runner

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// liveHeap is the Go heap still reachable after a collection, in bytes.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// redisUsedMemory is Redis's used_memory, summed over a cluster's masters.
func redisUsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	one := func(c redis.Cmdable) (int64, error) {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return one(rdb)
	}
	var mu sync.Mutex
	var sum int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := one(c)
		mu.Lock()
		sum += n
		mu.Unlock()
		return err
	})
	return sum, err
}
