package sysstat

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ParseInfo reads the numeric fields of one Redis INFO reply; section
// headers, text fields (redis_version) and blank lines are left out.
func ParseInfo(info string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		}
	}
	return out
}

// InfoField is one field of a Redis INFO reply as written ("" when it is
// not there).
func InfoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// RedisInfo is Redis's INFO (the given sections; none: the default ones),
// every numeric field summed over a cluster's masters.
func RedisInfo(ctx context.Context, rdb redis.UniversalClient, sections ...string) (map[string]float64, error) {
	out := map[string]float64{}
	var mu sync.Mutex
	one := func(ctx context.Context, c redis.Cmdable) error {
		info, err := c.Info(ctx, sections...).Result()
		if err != nil {
			return fmt.Errorf("redis info: %w", err)
		}
		mu.Lock()
		defer mu.Unlock()
		for k, v := range ParseInfo(info) {
			out[k] += v
		}
		return nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		if err := one(ctx, rdb); err != nil {
			return nil, err
		}
		return out, nil
	}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return one(ctx, c) })
	return out, err
}

// RedisUsedMemory is Redis's used_memory, summed over a cluster's masters.
func RedisUsedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	m, err := RedisInfo(ctx, rdb, "memory")
	return int64(m["used_memory"]), err
}

// MySQLStatus reads MySQL status variables (SHOW GLOBAL STATUS) by name;
// one the server does not have, or whose value is not a number, is left
// out of the map.
func MySQLStatus(ctx context.Context, db *sql.DB, names ...string) (map[string]float64, error) {
	q := "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(names, "','") + "')"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("global status: %w", err)
	}
	defer rows.Close()
	out := make(map[string]float64, len(names))
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("global status: %w", err)
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = f
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("global status: %w", err)
	}
	return out, nil
}
