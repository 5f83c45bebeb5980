package ensure

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

//go:embed apply.lua
var applyLua string

var applyScript = redis.NewScript(applyLua)

// applyBatch is how many log rows one pass reads and applies (one MySQL
// read, one Redis pipeline, one MySQL update).
const applyBatch = 500

// pendingRow is a log row not yet synced.
type pendingRow struct {
	id       int64
	order    string
	kind     string
	sku      string
	created  time.Time
	attempts int
	alerted  bool
}

// Run runs the worker (woken by every log row this instance commits, and
// every OutboxPeriod for rows of other instances), the retry job (every
// ReconcilePeriod) and the recovery pass (every SweepPeriod) until ctx
// ends.
func (s *Strategy) Run(ctx context.Context) error {
	onErr := func(error) { s.c.bgErrors.Add(1) }
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		s.worker(ctx, onErr)
	}()
	go func() {
		defer wg.Done()
		sqlstore.Every(ctx, s.cfg.ReconcilePeriod, s.retry, onErr)
	}()
	go func() {
		defer wg.Done()
		sqlstore.Every(ctx, s.cfg.SweepPeriod, s.recover, onErr)
	}()
	wg.Wait()
	return nil
}

// worker applies fresh log rows until ctx ends: a pass on every nudge and
// every OutboxPeriod, and again at once while a pass finds a full batch.
func (s *Strategy) worker(ctx context.Context, onErr func(error)) {
	t := time.NewTicker(s.cfg.OutboxPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		for ctx.Err() == nil {
			n, err := s.work(ctx)
			if err != nil {
				if ctx.Err() == nil {
					onErr(err)
				}
				break
			}
			if n < applyBatch {
				break
			}
		}
	}
}

// work is one pass of the worker: the oldest rows never tried, applied to
// Redis; those applied are marked synced, those that failed get their
// first failed attempt and are the retry job's from then on. It returns
// how many rows it read.
func (s *Strategy) work(ctx context.Context) (int, error) {
	rows, err := s.pending(ctx, "synced=0 AND attempts=0")
	if err != nil {
		return 0, err
	}
	backlog := int64(len(rows))
	if len(rows) == applyBatch {
		if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_log WHERE synced=0").Scan(&backlog); err != nil {
			return 0, fmt.Errorf("stock log: %w", err)
		}
	}
	s.backlog.Store(backlog)
	for {
		m := s.c.backlogMax.Load()
		if backlog <= m || s.c.backlogMax.CompareAndSwap(m, backlog) {
			break
		}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	ok, failed := s.applyRows(ctx, rows)
	if err := s.markSynced(ctx, ok); err != nil {
		return 0, err
	}
	if len(failed) > 0 {
		s.c.workerFailures.Add(int64(len(failed)))
		if err := s.markFailed(ctx, failed); err != nil {
			return 0, err
		}
	}
	return len(rows), nil
}

// retry is the retry job: every row unsynced for longer than an operation
// may run (OpTimeout: so not one a worker still holds) is applied again.
// Each attempt is counted; a row still failing after its first failure
// and alertAfter failed retries raises its alert, once.
func (s *Strategy) retry(ctx context.Context) error {
	before := clock.Now().UTC().Add(-s.cfg.OpTimeout)
	after := int64(0)
	for {
		rows, err := s.pending(ctx, "synced=0 AND id>? AND created_at<?", after, before)
		if err != nil || len(rows) == 0 {
			return err
		}
		after = rows[len(rows)-1].id
		s.c.retries.Add(int64(len(rows)))
		ok, failed := s.applyRows(ctx, rows)
		if err := s.markSynced(ctx, ok); err != nil {
			return err
		}
		s.c.retriedSynced.Add(int64(len(ok)))
		if err := s.markFailed(ctx, failed); err != nil {
			return err
		}
		var alert []any
		for _, r := range failed {
			if r.attempts+1 >= 1+alertAfter && !r.alerted {
				alert = append(alert, r.id)
			}
		}
		if len(alert) > 0 {
			// Several instances may retry one row: the alert is its row's
			// flag, raised by whoever sets it.
			out, err := s.db.ExecContext(ctx, "UPDATE stock_log SET alerted=1 WHERE alerted=0 AND id IN ("+sqlstore.Placeholders(len(alert))+")", alert...)
			if err != nil {
				return fmt.Errorf("stock log alert: %w", err)
			}
			n, _ := out.RowsAffected()
			s.c.alerts.Add(n)
		}
		if len(rows) < applyBatch {
			return nil
		}
	}
}

// drainRounds bounds the rounds of a drain in which some row failed.
const drainRounds = 10

// drain applies every unsynced row, whatever its age or attempts, until
// none is left (Settle). A row that keeps failing makes it fail after
// drainRounds rounds, a sweep period apart (or when ctx ends).
func (s *Strategy) drain(ctx context.Context) error {
	fails := 0
	for {
		rows, err := s.pending(ctx, "synced=0")
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			s.backlog.Store(0)
			return nil
		}
		ok, failed := s.applyRows(ctx, rows)
		if err := s.markSynced(ctx, ok); err != nil {
			return err
		}
		if len(failed) > 0 {
			if err := s.markFailed(ctx, failed); err != nil {
				return err
			}
			if fails++; fails >= drainRounds {
				return fmt.Errorf("stock log: %d rows fail to apply (first: order %s)", len(failed), failed[0].order)
			}
			// A Redis that is back is rebuilt if it restarted; one still
			// away (Ready fails too: the next round's rows say so) gets a
			// sweep period before the next round.
			_ = s.rs.Ready(ctx)
			if !clock.Sleep(ctx, s.cfg.SweepPeriod) {
				return ctx.Err()
			}
		}
	}
}

// pending reads up to applyBatch unsynced rows matching where, oldest
// first.
func (s *Strategy) pending(ctx context.Context, where string, args ...any) ([]pendingRow, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, order_id, kind, sku, created_at, attempts, alerted FROM stock_log WHERE "+where+
		fmt.Sprintf(" ORDER BY id LIMIT %d", applyBatch), args...)
	if err != nil {
		return nil, fmt.Errorf("stock log: %w", err)
	}
	defer rows.Close()
	var out []pendingRow
	for rows.Next() {
		var r pendingRow
		if err := rows.Scan(&r.id, &r.order, &r.kind, &r.sku, &r.created, &r.attempts, &r.alerted); err != nil {
			return nil, fmt.Errorf("stock log: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("stock log: %w", err)
	}
	return out, nil
}

// applyRows runs apply.lua for each row in one pipeline and sorts the rows
// into those Redis is now in line with and those to try again.
func (s *Strategy) applyRows(ctx context.Context, rows []pendingRow) (ok, failed []pendingRow) {
	cmds := make([]*redis.Cmd, len(rows))
	args := func(r pendingRow) ([]string, []any) {
		return []string{inventory.RedisStockKey(r.sku), inventory.RedisReservationKey(r.sku, r.order), inventory.RedisLiveKey(r.sku), inventory.RedisBuyersKey(r.sku)},
			[]any{r.kind, r.order, s.cfg.Retain.Milliseconds()}
	}
	_, _ = s.rs.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, r := range rows {
			k, a := args(r)
			cmds[i] = applyScript.EvalSha(ctx, p, k, a...)
		}
		return nil
	})
	ready := false
	for i, r := range rows {
		out, err := cmds[i].Text()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			// A Redis that lost its scripts restarted: rebuilt from MySQL
			// first (redisstock.Fence), then this row, with the source.
			if !ready {
				if err = s.rs.Ready(ctx); err != nil {
					failed = append(failed, r)
					continue
				}
				ready = true
			}
			k, a := args(r)
			out, err = applyScript.Run(ctx, s.rs.R, k, a...).Text()
		}
		switch {
		case err != nil || out == "nohash":
			failed = append(failed, r)
			continue
		case out == "moved":
			s.c.applied.Add(1)
		case out == "marked":
			s.c.marked.Add(1)
		case out == "none":
			s.c.lost.Add(1)
		case out == string(inventory.StateCancelled) || out == string(inventory.StateExpired):
			// MySQL holds a paid decision Redis holds a release for:
			// nothing a retry can change. Counted (an alert), and synced.
			s.c.conflicts.Add(1)
		}
		ok = append(ok, r)
	}
	return ok, failed
}

// markSynced marks rows synced and records their lag (commit → now),
// unless Settle's drain synced them.
func (s *Strategy) markSynced(ctx context.Context, rows []pendingRow) error {
	if len(rows) == 0 {
		return nil
	}
	now := clock.Now().UTC()
	ids := make([]any, 0, len(rows)+1)
	ids = append(ids, now)
	for _, r := range rows {
		ids = append(ids, r.id)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE stock_log SET synced=1, synced_at=? WHERE id IN ("+sqlstore.Placeholders(len(rows))+")", ids...); err != nil {
		return fmt.Errorf("stock log: mark synced: %w", err)
	}
	if s.settling.Load() {
		return nil
	}
	s.mu.Lock()
	for _, r := range rows {
		_ = s.lag.RecordValue(max(1, now.Sub(r.created).Microseconds()))
	}
	s.mu.Unlock()
	return nil
}

// markFailed counts a failed attempt on each row.
func (s *Strategy) markFailed(ctx context.Context, rows []pendingRow) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]any, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE stock_log SET attempts=attempts+1 WHERE synced=0 AND id IN ("+sqlstore.Placeholders(len(rows))+")", ids...); err != nil {
		return fmt.Errorf("stock log: mark failed: %w", err)
	}
	return nil
}

// refundsQuiet is the sold correction's guard (redisstock.Quiet): the
// SKU's refund rows — how many (the mark), and whether none is unsynced.
// A refund moves MySQL's sold down before Redis's, which a correction
// would otherwise take for drift and move a second time.
func refundsQuiet(ctx context.Context, q sqlstore.Rows, sku string) (int64, bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT COUNT(*), COALESCE(SUM(synced=0),0) FROM stock_log WHERE sku=? AND kind=?", sku, kindRefund)
	if err != nil {
		return 0, false, fmt.Errorf("stock log: %w", err)
	}
	defer rows.Close()
	var n, unsynced int64
	if rows.Next() {
		if err := rows.Scan(&n, &unsynced); err != nil {
			return 0, false, fmt.Errorf("stock log: %w", err)
		}
	}
	return n, unsynced == 0, rows.Err()
}

// Pending counts what Settle may have to do: unsynced log rows, and live
// Redis reservations (to expire or release). A count, pipelined over the
// catalog. Safe for concurrent use.
func (s *Strategy) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_log WHERE synced=0").Scan(&n); err != nil {
		return 0, fmt.Errorf("pending: %w", err)
	}
	skus := s.skus.List()
	for len(skus) > 0 {
		batch := skus[:min(len(skus), 1000)]
		skus = skus[len(batch):]
		cmds := make([]*redis.IntCmd, len(batch))
		if _, err := s.rs.R.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, sku := range batch {
				cmds[i] = p.ZCard(ctx, inventory.RedisLiveKey(sku))
			}
			return nil
		}); err != nil {
			return 0, fmt.Errorf("pending: %w", err)
		}
		for _, c := range cmds {
			n += c.Val()
		}
	}
	return n, nil
}

// Settle rebuilds a Redis that restarted, drains the log, runs a recovery
// pass (releases, expiry, the sold correction) and drains again.
func (s *Strategy) Settle(ctx context.Context) error {
	s.settling.Store(true)
	defer s.settling.Store(false)
	if err := s.rs.Ready(ctx); err != nil {
		return err
	}
	if err := s.drain(ctx); err != nil {
		return err
	}
	if err := s.recover(ctx); err != nil {
		return err
	}
	return s.drain(ctx)
}
