package servers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// TestRedisCluster starts a 3-master Redis Cluster through the local
// provider and checks the key layout against the cluster itself: each SKU's
// keys share one slot (so one script may touch them), SKUs spread over the
// masters, and a script touching two SKUs' keys is refused (CROSSSLOT) —
// the failure a key outside its SKU's hash tag would meet.
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	l, err := servers.NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	l.RedisCluster = 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ep, err := l.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if len(ep.RedisCluster) != 3 || len(ep.ExtraPIDs["redis"]) != 2 {
		t.Fatalf("endpoints: cluster %v, extra pids %v", ep.RedisCluster, ep.ExtraPIDs)
	}
	conns, err := servers.Open(ep, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	cc, ok := conns.Redis.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("pool is a %T, want a cluster client", conns.Redis)
	}
	masters := map[string]bool{}
	for i := 0; i < 50; i++ {
		sku := fmt.Sprintf("SKU-%d", i)
		keys := []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku), inventory.RedisReservationKey(sku, "order-1")}
		slot := int64(-1)
		for _, k := range keys {
			s, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if slot >= 0 && s != slot {
				t.Fatalf("%s: %s is in slot %d, %s in %d: one script cannot touch both", sku, keys[0], slot, k, s)
			}
			slot = s
		}
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Errorf("50 SKUs landed on %d masters, want all 3", len(masters))
	}
	// Keys of two SKUs in one script: the cluster refuses, as it would a
	// strategy whose key left its SKU's hash tag.
	var crossed bool
	for i := 1; i < 50 && !crossed; i++ {
		a, b := inventory.RedisStockKey("SKU-0"), inventory.RedisStockKey(fmt.Sprintf("SKU-%d", i))
		sa, _ := cc.ClusterKeySlot(ctx, a).Result()
		sb, _ := cc.ClusterKeySlot(ctx, b).Result()
		if sa == sb {
			continue
		}
		crossed = true
		node, err := cc.MasterForKey(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		err = node.Eval(ctx, "return redis.call('EXISTS', KEYS[1], KEYS[2])", []string{a, b}).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("a script on two SKUs' keys: %v, want CROSSSLOT", err)
		}
	}
	// ResetRedis reaches every master.
	for i := 0; i < 50; i++ {
		if err := cc.Set(ctx, inventory.RedisStockKey(fmt.Sprintf("SKU-%d", i)), 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := inventory.ResetRedis(ctx, cc); err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := inventory.ScanKeys(ctx, cc, inventory.RedisPrefix+"*", func(keys []string) error { left += len(keys); return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d keys left after ResetRedis on the cluster", left)
	}
}
