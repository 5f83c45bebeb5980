package redisstock

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// parseSnapshot reads the snapshot script's reply for sku.
func parseSnapshot(sku string, v []any) Snapshot {
	out := Snapshot{Stock: inventory.Stock{SKU: sku}}
	if n, _ := v[0].(int64); n == 0 {
		out.Missing = true
		return out
	}
	out.Stock.Total, out.Stock.Available, out.Stock.Occupied, out.Stock.Sold = num(v[1]), num(v[2]), num(v[3]), num(v[4])
	out.Ver, _ = v[5].(string)
	out.RV = num(v[6])
	out.Gen, _ = v[7].(string)
	out.Confirmed, _ = v[8].(int64)
	out.Live = make(map[string]int64, (len(v)-9)/2)
	for i := 9; i+1 < len(v); i += 2 {
		id, _ := v[i].(string)
		out.Live[id] = num(v[i+1])
	}
	return out
}

// num reads a number a script returned as a Redis string (0 when it is
// not one).
func num(x any) int64 {
	str, _ := x.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}

// Snapshots is Snapshot for many SKUs in one pipeline (split by node on a
// Cluster): each SKU's reply is one instant of Redis, the SKUs are not.
// The script is sent by EVAL, which never touches the Try script the
// fence watches. Read-only; safe to call concurrently.
func (s Store) Snapshots(ctx context.Context, skus []string) ([]Snapshot, error) {
	cmds := make([]*redis.Cmd, len(skus))
	_, err := s.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = snapshotScript.Eval(ctx, p, []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku)},
				inventory.RedisReservationKey(sku, ""))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis snapshots: %w", err)
	}
	out := make([]Snapshot, len(skus))
	for i, c := range cmds {
		v, err := c.Slice()
		if err != nil {
			return nil, fmt.Errorf("redis snapshot %s: %w", skus[i], err)
		}
		out[i] = parseSnapshot(skus[i], v)
	}
	return out, nil
}

// Versions reads the stock hashes' versions in one pipeline: "" for a
// missing hash, "0" for one never written since it was loaded.
func (s Store) Versions(ctx context.Context, skus []string) ([]string, error) {
	cmds := make([]*redis.SliceCmd, len(skus))
	_, err := s.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = p.HMGet(ctx, inventory.RedisStockKey(sku), "total", "ver")
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis versions: %w", err)
	}
	out := make([]string, len(skus))
	for i, c := range cmds {
		v := c.Val()
		if v[0] == nil {
			continue
		}
		ver, _ := v[1].(string)
		if ver == "" {
			ver = "0"
		}
		out[i] = ver
	}
	return out, nil
}

// RowsPage reads up to n inventory rows (total, version, sold) after the
// SKU after, in SKU order: keyset pages, so a pass over a catalog of a
// million SKUs never holds it whole.
func RowsPage(ctx context.Context, db *sql.DB, after string, n int) ([]SKURow, error) {
	rows, err := db.QueryContext(ctx, "SELECT sku, total, version, sold FROM inventory WHERE sku > ? ORDER BY sku LIMIT ?", after, n)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer rows.Close()
	out := make([]SKURow, 0, n)
	for rows.Next() {
		var c SKURow
		if err := rows.Scan(&c.SKU, &c.Total, &c.Version, &c.Sold); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Glance is what one pipelined read says of a SKU's Redis side: whether
// its hash exists, its total, sold and available, and how many live reservations it
// holds. A pass over the catalog uses it to skip the SKUs with nothing to
// recover.
type Glance struct {
	Missing                bool
	Total, Sold, Available int64
	Live                   int64
}

// Glances reads the Glance of every row's SKU in one pipeline.
func (s Store) Glances(ctx context.Context, rows []SKURow) ([]Glance, error) {
	hm := make([]*redis.SliceCmd, len(rows))
	zc := make([]*redis.IntCmd, len(rows))
	_, err := s.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range rows {
			hm[i] = p.HMGet(ctx, inventory.RedisStockKey(r.SKU), "total", "sold", "available")
			zc[i] = p.ZCard(ctx, inventory.RedisLiveKey(r.SKU))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis glance: %w", err)
	}
	out := make([]Glance, len(rows))
	for i := range rows {
		v := hm[i].Val()
		if v[0] == nil {
			out[i].Missing = true
		} else {
			t, _ := v[0].(string)
			so, _ := v[1].(string)
			out[i].Total, _ = strconv.ParseInt(t, 10, 64)
			out[i].Sold, _ = strconv.ParseInt(so, 10, 64)
			av, _ := v[2].(string)
			out[i].Available, _ = strconv.ParseInt(av, 10, 64)
		}
		out[i].Live = zc[i].Val()
	}
	return out, nil
}
