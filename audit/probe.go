package audit

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// Probe checks, a few times a second while load runs, the invariants that
// must hold at every instant — not only at the end (Jepsen's bank checker
// reads during the run): per SKU, in one consistent MySQL snapshot, no
// negative field, available + occupied + sold = total (the row plus the
// outbox events not yet applied to it) and total = initial stock + the
// restock journal; in Redis, every field of the stock hash between 0 and
// the hash's total. A snapshot that breaks any of them is one violation;
// the report keeps the first, the worst (most units off) and the last.
// It reads only, never a strategy; memory does not grow with the run, nor
// does its load on MySQL: the journal, which grows with every restock, is
// summed only in snapshots at least journalShare times its last sum's
// time apart (see Run).
// Run is not safe for concurrent use on one Probe value.
type Probe struct {
	DB *sql.DB
	// Redis, when set, is the Redis of a strategy that keeps stock there.
	Redis redis.UniversalClient
	// Initial is the stock the harness loaded per SKU, before restocks.
	Initial map[string]int64
	// Period between snapshots (default 250 ms).
	Period time.Duration
	// OnViolation, when set, is told of each violating snapshot as it is
	// seen, on Run's goroutine (--abort-on anomaly stops the load on the
	// first); it must not block.
	OnViolation func(ProbeInstant)
}

// ProbeInstant is one snapshot that broke an invariant.
type ProbeInstant struct {
	// AtSec is when it was taken, in seconds from the probe's origin
	// (the start of the measured phase: negative during warm-up).
	AtSec float64 `json:"at_sec"`
	// Units is how far off it was: every broken rule's difference, summed.
	Units int64 `json:"units"`
	// What says which rule broke first, and where.
	What string `json:"what"`
}

// ProbeReport is what a probe saw during load.
type ProbeReport struct {
	// Snapshots taken, and how many of them broke an invariant.
	Snapshots  int `json:"snapshots"`
	Violations int `json:"violations"`
	// Errors counts snapshots the stores could not give (a fault, a
	// timeout): they are not checked, and not violations.
	Errors int `json:"errors"`
	// JournalChecks counts the snapshots that also checked total against
	// the restock journal (all of them while summing the journal is
	// cheap; fewer as it grows).
	JournalChecks int           `json:"journal_checks"`
	First         *ProbeInstant `json:"first,omitempty"`
	Worst         *ProbeInstant `json:"worst,omitempty"`
	Last          *ProbeInstant `json:"last,omitempty"`
}

// Run takes a snapshot every Period until ctx ends and returns the report;
// instants are measured from origin. A snapshot sums the restock journal
// when the last sum is at least journalShare times its own duration old:
// every snapshot while the journal is small, and, as restocks pile up
// through an hour, never more than 1/journalShare of MySQL's time —
// summing a 120,000-row journal for 10 SKUs four times a second took half
// a core at the end of an hour-long run, which counted as the strategy's
// own cost per flow growing.
func (p Probe) Run(ctx context.Context, origin time.Time) ProbeReport {
	period := p.Period
	if period <= 0 {
		period = 250 * time.Millisecond
	}
	var rep ProbeReport
	var summedAt time.Time
	var sumTook time.Duration
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rep
		case <-t.C:
		}
		at := time.Now()
		journal := summedAt.IsZero() || at.Sub(summedAt) >= journalShare*sumTook
		units, what, err := p.check(ctx, journal)
		switch {
		case ctx.Err() != nil:
			return rep
		case err != nil:
			rep.Errors++
			continue
		}
		if journal {
			summedAt, sumTook = at, time.Since(at)
			rep.JournalChecks++
		}
		rep.Snapshots++
		if units == 0 && what == "" {
			continue
		}
		in := ProbeInstant{AtSec: at.Sub(origin).Seconds(), Units: units, What: what}
		rep.note(in)
		if p.OnViolation != nil {
			p.OnViolation(in)
		}
	}
}

func (r *ProbeReport) note(in ProbeInstant) {
	r.Violations++
	if r.First == nil {
		r.First = &in
	}
	if r.Worst == nil || in.Units > r.Worst.Units {
		w := in
		r.Worst = &w
	}
	l := in
	r.Last = &l
}

// journalShare bounds the MySQL time the probe's journal sums take: one
// in journalShare (see Run).
const journalShare = 50

// check takes one snapshot of each store and returns how many units the
// broken rules are off by, and the first rule broken ("" when none);
// withJournal checks total against the restock journal too.
func (p Probe) check(ctx context.Context, withJournal bool) (units int64, what string, err error) {
	broke := func(n int64, format string, args ...any) {
		units += abs(n)
		if what == "" {
			what = fmt.Sprintf(format, args...)
		}
	}
	rows, journal, err := p.mysqlSnapshot(ctx, withJournal)
	if err != nil {
		return 0, "", err
	}
	totals := make(map[string]int64, len(rows))
	for _, s := range rows {
		totals[s.SKU] = s.Total
		for _, f := range []struct {
			name string
			v    int64
		}{{"available", s.Available}, {"occupied", s.Occupied}, {"sold", s.Sold}} {
			if f.v < 0 {
				broke(f.v, "mysql %s: %s %d < 0", s.SKU, f.name, f.v)
			}
		}
		if d := s.Available + s.Occupied + s.Sold - s.Total; d != 0 {
			broke(d, "mysql %s: available %d + occupied %d + sold %d != total %d", s.SKU, s.Available, s.Occupied, s.Sold, s.Total)
		}
		if init, ok := p.Initial[s.SKU]; ok && withJournal {
			if d := s.Total - init - journal[s.SKU]; d != 0 {
				broke(d, "mysql %s: total %d != initial %d + restock journal %d", s.SKU, s.Total, init, journal[s.SKU])
			}
		}
	}
	if p.Redis == nil {
		return units, what, nil
	}
	skus := make([]string, 0, len(rows))
	for _, s := range rows {
		skus = append(skus, s.SKU)
	}
	sort.Strings(skus)
	cmds := make([]*redis.SliceCmd, len(skus))
	_, err = p.Redis.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = pl.HMGet(ctx, inventory.RedisStockKey(sku), "total", "available", "occupied", "sold")
		}
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("probe: redis: %w", err)
	}
	for i, sku := range skus {
		v := cmds[i].Val()
		if v[0] == nil {
			continue // no hash (lost, or being rebuilt): the audit counts a missing hash
		}
		var f [4]int64
		for j := range f {
			s, _ := v[j].(string)
			f[j], _ = strconv.ParseInt(s, 10, 64)
		}
		for j, name := range []string{"available", "occupied", "sold"} {
			switch x := f[j+1]; {
			case x < 0:
				broke(x, "redis %s: %s %d < 0", sku, name, x)
			case x > f[0]:
				broke(x-f[0], "redis %s: %s %d > total %d", sku, name, x, f[0])
			}
		}
	}
	return units, what, nil
}

// mysqlSnapshot reads every SKU's stock (the row plus its unapplied outbox
// events, as the audit does) and, withJournal, its restock journal sum, in
// one consistent snapshot.
func (p Probe) mysqlSnapshot(ctx context.Context, withJournal bool) ([]inventory.Stock, map[string]int64, error) {
	tx, err := p.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `
		SELECT i.sku, i.total, i.available, i.occupied, i.sold,
		       COALESCE((SELECT SUM(CASE WHEN e.kind='reserve' THEN -e.qty WHEN e.kind IN ('release','refund') THEN e.qty ELSE 0 END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       COALESCE((SELECT SUM(CASE WHEN e.kind='reserve' THEN e.qty WHEN e.kind='refund' THEN 0 ELSE -e.qty END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       COALESCE((SELECT SUM(CASE WHEN e.kind='confirm' THEN e.qty WHEN e.kind='refund' THEN -e.qty ELSE 0 END) FROM outbox e WHERE e.sku=i.sku AND e.applied=0),0),
		       `+journalSum(withJournal)+`
		FROM inventory i ORDER BY i.sku`)
	if err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	defer rows.Close()
	var out []inventory.Stock
	journal := map[string]int64{}
	for rows.Next() {
		var s inventory.Stock
		var da, do, ds, j int64
		if err := rows.Scan(&s.SKU, &s.Total, &s.Available, &s.Occupied, &s.Sold, &da, &do, &ds, &j); err != nil {
			return nil, nil, fmt.Errorf("probe: %w", err)
		}
		s.Available, s.Occupied, s.Sold = s.Available+da, s.Occupied+do, s.Sold+ds
		journal[s.SKU] = j
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("probe: %w", err)
	}
	rows.Close()
	// The strategies' own layout (stock buckets, unit rows) in the same
	// snapshot: those SKUs keep only their total in the inventory row.
	layout, err := layoutDeltas(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	for i := range out {
		if d, ok := layout[out[i].SKU]; ok {
			out[i].Available += d.Available
			out[i].Occupied += d.Occupied
			out[i].Sold += d.Sold
		}
	}
	return out, journal, nil
}

// journalSum is the probe's restock journal column: the SKU's sum, or 0
// when this snapshot does not check it.
func journalSum(withJournal bool) string {
	if !withJournal {
		return "0"
	}
	return "COALESCE((SELECT SUM(r.qty) FROM restocks r WHERE r.sku=i.sku),0)"
}
