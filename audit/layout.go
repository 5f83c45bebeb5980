package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// errNoSuchTable is MySQL's ER_NO_SUCH_TABLE.
const errNoSuchTable = 1146

// layoutDelta is what a strategy's own stock layout adds to a SKU's
// inventory row: the buckets strategy keeps the SKU's available, occupied
// and sold units in stock_buckets rows, the skiplocked strategy in one
// stock_units row per unit. Both leave the inventory row's total as the
// SKU's total and its other counts at 0, so MySQL's view of a SKU is the
// row plus these sums, whichever strategy ran (for every other strategy
// both tables are empty and the delta is 0). NegativeBuckets counts bucket
// rows with a negative count, which a sum could hide.
type layoutDelta struct {
	Available, Occupied, Sold int64
	NegativeBuckets           int64
}

// queryer is a *sql.DB or a *sql.Tx (the probe reads in its snapshot).
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// layoutDeltas reads the bucket sums and unit counts of every SKU, one
// grouped query per table (set-based: no per-SKU round trip).
func layoutDeltas(ctx context.Context, db queryer) (map[string]layoutDelta, error) {
	out := map[string]layoutDelta{}
	for _, q := range []string{
		`SELECT sku, SUM(available), SUM(occupied), SUM(sold),
		        SUM(available < 0 OR occupied < 0 OR sold < 0)
		 FROM stock_buckets GROUP BY sku`,
		`SELECT sku, SUM(state='available'), SUM(state='occupied'), SUM(state='sold'),
		        SUM(state NOT IN ('available','occupied','sold'))
		 FROM stock_units GROUP BY sku`,
	} {
		rows, err := db.QueryContext(ctx, q)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == errNoSuchTable {
			continue // a database set up before these tables existed
		}
		if err != nil {
			return nil, fmt.Errorf("audit: read stock layout: %w", err)
		}
		for rows.Next() {
			var sku string
			var d layoutDelta
			if err := rows.Scan(&sku, &d.Available, &d.Occupied, &d.Sold, &d.NegativeBuckets); err != nil {
				rows.Close()
				return nil, fmt.Errorf("audit: scan stock layout: %w", err)
			}
			c := out[sku]
			c.Available += d.Available
			c.Occupied += d.Occupied
			c.Sold += d.Sold
			c.NegativeBuckets += d.NegativeBuckets
			out[sku] = c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("audit: read stock layout: %w", err)
		}
	}
	return out, nil
}

// addLayout adds the strategies' own layout (buckets, unit rows) to a SKU
// read from its inventory row, and reports a broken bucket or unit row as
// an invariant violation. The map holds only SKUs that have such rows
// (none unless buckets or skiplocked ran).
func addLayout(s *SKUAudit, deltas map[string]layoutDelta, k sink) {
	d, ok := deltas[s.SKU]
	if !ok {
		return
	}
	s.Available += d.Available
	s.Occupied += d.Occupied
	s.Sold += d.Sold
	if d.NegativeBuckets > 0 {
		k.violate("mysql %s: %d bucket or unit rows with a negative count or an unknown state", s.SKU, d.NegativeBuckets)
	}
}
