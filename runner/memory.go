package runner

import (
	"context"
	"runtime"

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
	m, err := redisInfo(ctx, rdb, "memory")
	return int64(m["used_memory"]), err
}
