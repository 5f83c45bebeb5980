package redisstock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
)

// Fence keeps Try off a Redis that lost its data until the stock is
// rebuilt from MySQL. A Redis that restarts — empty, or holding what its
// append-only file kept, or a replica promoted in its place — has lost the
// writes it did not persist or replicate, acknowledged or not; its stock
// hashes may then offer units MySQL's orders already hold (oversell) or
// count sales it never saw (drift). It also forgets every script: the
// script cache is neither persisted nor replicated. So the Try script is
// the sentinel. Try runs only by EVALSHA, never loading the script itself;
// a NOSCRIPT answer means the server is a new process (or an operator
// flushed the cache), and the Try did not run. The first Try to see it
// rebuilds every SKU's hash from MySQL (Rebuild), loads the script again
// and runs; other Trys of this instance wait for that. A strategy instance
// that starts (Setup, through Ready) on a server without the script does
// the same before it serves. Safe for concurrent use.
//
// A gated fence (Drain set) is for a strategy whose truth is MySQL plus a
// local table of each instance's own (outbox-local): a rebuild from MySQL
// alone would not see the decisions still in any instance's table and
// would sell their units again. Its rebuild is a round among every
// instance on the stores (Member): each closes its gate (its operations
// that write Redis leave, no new one enters), drains its table into MySQL
// and marks the round — the fence's epoch, kept in MySQL's redis_fence
// table — as drained; only once every live member has marked it does one
// of them (a row lock elects it) rebuild from MySQL and load the Try
// script, and each member opens its gate again once the script is back.
// A member that notices nothing itself (no Try since the restart) joins
// the round from its heartbeat (Beat), so a round lasts about one beat
// period. A member silent for longer than Lease is presumed dead: the
// round goes on without it, and counts it (PresumedDead).
//
// A member a round went on without is late: its epoch in redis_fence is
// below the fence's. Its table may hold decisions made on the Redis that
// was lost, which neither MySQL nor the rebuilt Redis counts; relaying
// them as they are could sell a unit twice. So a late member never
// relays them as they are: its relay's transaction checks the member's
// epoch under a shared lock of the fence's row (CheckTx: a rebuild holds
// that row's exclusive lock, so a relay lands wholly before a rebuild's
// read or is refused after it), and it takes part in rounds without
// draining. When it learns it is late (its heartbeat, Ready) it catches
// up in a round of its own, gate closed, on the rebuilt Redis: CatchUp
// replays its table's decisions there — Redis, which sells, decides again
// whether each still fits; what no longer fits is refused and counted —
// and only then is the member's epoch brought level, under the same
// shared lock, so a rebuild that started meanwhile makes it catch up
// again. A new member joins at the fence's epoch.
type Fence struct {
	DB *sql.DB
	// OnRebuild, when set, runs after every rebuild (the outbox reconciler
	// drops the differences it was watching: they describe a Redis that
	// is gone).
	OnRebuild func()
	// Drain, when set, makes the fence gated, for a strategy whose truth
	// is MySQL plus writes of its own not yet there (outbox-local's local
	// message table). Each of its operations that writes Redis runs
	// between Enter and Leave, and its Try answers ErrFenced instead of
	// rebuilding; the rebuild (Ready) then closes the gate, waits until no
	// operation is inside, runs Drain — which must bring every write of
	// this instance into MySQL — and, with the other members, rebuilds
	// from MySQL with operations held off, so no decision can land
	// between the drain and the read.
	Drain func(ctx context.Context) error
	// Member names this instance among those sharing the stores (gated
	// fence; empty: it is alone, and rebuilds after its own drain). Join
	// registers it.
	Member string
	// Lease is how long a member may stay silent before a round presumes
	// it dead (0: DefaultLease).
	Lease time.Duration
	// CatchUp, when set, is a late member's replay (see Fence): it runs
	// with the gate closed, on a Redis that holds the Try script, and must
	// leave in the local table only decisions the current Redis holds.
	// Without it a late member is brought level without a replay.
	CatchUp func(ctx context.Context) error

	mu       sync.Mutex // one rebuild at a time in this instance; guards round, life
	gate     gate       // gated fence: operations share it, a round closes it
	round    *round     // the round under way (gated), nil when none
	life     context.Context
	stop     context.CancelFunc
	rebuilds atomic.Int64
	dead     atomic.Int64 // members a round presumed dead
	rounds   atomic.Int64 // rounds this member took part in
	catchUps atomic.Int64 // catch-ups this member ran, late
}

// DefaultLease is a member's lease when Fence.Lease is 0: ten seconds of
// silence on a machine where a beat is due every BeatPeriod.
const DefaultLease = 10 * time.Second

// BeatPeriod is how often a member's Beat should run.
const BeatPeriod = 200 * time.Millisecond

// pollStep is how often a member waiting in a round looks at the others.
const pollStep = 20 * time.Millisecond

// round is one rebuild round of a gated fence, run by its own goroutine.
type round struct {
	done chan struct{}
	err  error // set before done closes
}

// ErrFenced: a gated fence's Try found a Redis without the Try script (a
// restart) and did not run; the caller leaves the fence (Leave), calls
// Store.Ready, and tries again.
var ErrFenced = errors.New("redis restarted: rebuild first")

// Enter marks the start of an operation that writes Redis (gated fence:
// see Drain); a round waits for it to Leave. While a round is under way it
// waits for the round's end, or ctx's (an error wrapping ErrFenced and
// ctx's: the operation did nothing). A nil fence, or one without Drain,
// does nothing.
func (f *Fence) Enter(ctx context.Context) error {
	if f == nil || f.Drain == nil {
		return nil
	}
	if err := f.gate.enter(ctx); err != nil {
		return fmt.Errorf("%w: a rebuild round is under way: %w", ErrFenced, err)
	}
	return nil
}

// Leave ends what Enter began (after an Enter that returned nil).
func (f *Fence) Leave() {
	if f != nil && f.Drain != nil {
		f.gate.leave()
	}
}

// Rebuilds is how many rebuilds this fence ran.
func (f *Fence) Rebuilds() int64 { return f.rebuilds.Load() }

// Rounds is how many rebuild rounds this member took part in (gated).
func (f *Fence) Rounds() int64 { return f.rounds.Load() }

// PresumedDead is how many members this fence's rounds went on without,
// silent past their lease: their undrained decisions, if any, were not in
// the rebuild (each catches up when it comes back: CatchUps).
func (f *Fence) PresumedDead() int64 { return f.dead.Load() }

// CatchUps is how many times this member found itself late and caught up.
func (f *Fence) CatchUps() int64 { return f.catchUps.Load() }

// ErrLate: this member missed a round (presumed dead, or stopped, while
// the others rebuilt Redis); its table's decisions may not be relayed as
// they are until it has caught up (see Fence).
var ErrLate = errors.New("redis fence: this member missed a rebuild round (presumed dead): catch up first")

// member reports whether the fence is a gated one with a member name.
func (f *Fence) member() bool { return f != nil && f.Drain != nil && f.Member != "" }

// epochs reads the fence's epoch (the last round done) and this member's
// (mine; valid false when the member has no row: it quit, or never
// joined). lock takes both rows' shared locks (in a transaction).
func (f *Fence) epochs(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, lock bool) (done int64, mine sql.NullInt64, err error) {
	query := "SELECT f.epoch, m.epoch FROM redis_fence f LEFT JOIN redis_fence m ON m.instance=? WHERE f.instance=''"
	if lock {
		query += " LOCK IN SHARE MODE"
	}
	if err := q.QueryRowContext(ctx, query, f.Member).Scan(&done, &mine); err != nil {
		return 0, mine, fmt.Errorf("redis fence: read the epochs: %w", err)
	}
	return done, mine, nil
}

// late reports whether this member missed a round, and the fence's epoch.
func (f *Fence) late(ctx context.Context) (bool, int64, error) {
	if !f.member() {
		return false, 0, nil
	}
	done, mine, err := f.epochs(ctx, f.DB, false)
	if err != nil {
		return false, 0, err
	}
	return mine.Valid && mine.Int64 < done, done, nil
}

// CheckTx is the relay's guard: run in the transaction that moves this
// member's events into MySQL, just before its commit, it takes the
// shared lock of the fence's row and answers ErrLate when this member
// missed a round. A rebuild holds that row's exclusive lock from before
// its read of MySQL to its commit of the new epoch, so the relay commits
// wholly before the read or finds itself late after it. Without a member
// it does nothing.
func (f *Fence) CheckTx(ctx context.Context, tx *sql.Tx) error {
	if !f.member() {
		return nil
	}
	done, mine, err := f.epochs(ctx, tx, true)
	if err != nil {
		return err
	}
	if mine.Valid && mine.Int64 < done {
		return ErrLate
	}
	return nil
}

// Alone reports whether this member may arm the fence without a round
// on a Redis whose stock hashes were all just built from MySQL: no other
// member is registered (live or silent: a silent one may hold undrained
// decisions and come back) and this member is not late. A fence without
// a member is always alone.
func (f *Fence) Alone(ctx context.Context) (bool, error) {
	if !f.member() {
		return true, nil
	}
	var n int
	if err := f.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM redis_fence WHERE instance NOT IN ('', ?)", f.Member).Scan(&n); err != nil {
		return false, fmt.Errorf("redis fence: members: %w", err)
	}
	if n > 0 {
		return false, nil
	}
	late, _, err := f.late(ctx)
	return !late && err == nil, err
}

func (f *Fence) lease() time.Duration {
	if f.Lease > 0 {
		return f.Lease
	}
	return DefaultLease
}

// Join registers the member in MySQL's redis_fence table (and the fence's
// own row), with a fresh heartbeat. A new member joins at the fence's
// epoch (it holds no decision yet); one already there (a restart on the
// same directory) keeps its epoch — late, if a round went on without it.
// Without Member it does nothing.
func (f *Fence) Join(ctx context.Context) error {
	if !f.member() {
		return nil
	}
	if _, err := f.DB.ExecContext(ctx, "INSERT IGNORE INTO redis_fence (instance, epoch, beat) VALUES ('', 0, NOW(6))"); err != nil {
		return fmt.Errorf("redis fence: join: %w", err)
	}
	var done int64
	if err := f.DB.QueryRowContext(ctx, "SELECT epoch FROM redis_fence WHERE instance=''").Scan(&done); err != nil {
		return fmt.Errorf("redis fence: join: %w", err)
	}
	if _, err := f.DB.ExecContext(ctx, "INSERT INTO redis_fence (instance, epoch, beat) VALUES (?, ?, NOW(6)) ON DUPLICATE KEY UPDATE beat=NOW(6)", f.Member, done); err != nil {
		return fmt.Errorf("redis fence: join: %w", err)
	}
	return nil
}

// Quit removes the member from the fence: call it only when this instance
// holds no decision MySQL lacks (its table drained), as it stops. Rounds
// no longer wait for it.
func (f *Fence) Quit(ctx context.Context) error {
	if f == nil || f.Drain == nil || f.Member == "" {
		return nil
	}
	if _, err := f.DB.ExecContext(ctx, "DELETE FROM redis_fence WHERE instance=?", f.Member); err != nil {
		return fmt.Errorf("redis fence: quit: %w", err)
	}
	return nil
}

// Stop ends a round under way (its goroutine returns, the gate opens):
// the instance is closing. Later rounds start afresh.
func (f *Fence) Stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	stop := f.stop
	f.life, f.stop = nil, nil
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Peers counts the other live members (heartbeat within the lease).
func (f *Fence) Peers(ctx context.Context) (int, error) {
	if f == nil || f.Drain == nil || f.Member == "" {
		return 0, nil
	}
	var n int
	err := f.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM redis_fence WHERE instance NOT IN ('', ?) AND beat > NOW(6) - INTERVAL ? MICROSECOND",
		f.Member, f.lease().Microseconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("redis fence: peers: %w", err)
	}
	return n, nil
}

// Beat is a member's heartbeat: it refreshes the member's row and, when
// Redis has lost the Try script (a restart no operation of this instance
// noticed), joins the rebuild round (Ready). Run it every BeatPeriod.
func (s Store) Beat(ctx context.Context) error {
	f := s.Fence
	if f == nil || f.Drain == nil {
		return nil
	}
	if f.Member != "" {
		if _, err := f.DB.ExecContext(ctx, "UPDATE redis_fence SET beat=NOW(6) WHERE instance=?", f.Member); err != nil {
			return fmt.Errorf("redis fence: beat: %w", err)
		}
	}
	return s.Ready(ctx)
}

// beatUntil refreshes the member's heartbeat every BeatPeriod until ctx
// ends (a round under way: see runRound).
func (f *Fence) beatUntil(ctx context.Context) {
	if f.Member == "" {
		return
	}
	t := time.NewTicker(BeatPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = f.DB.ExecContext(ctx, "UPDATE redis_fence SET beat=NOW(6) WHERE instance=?", f.Member)
		}
	}
}

// isNoScript reports Redis's NOSCRIPT error.
func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// try runs the Try script by EVALSHA only; on NOSCRIPT it rebuilds (or
// waits for this instance's rebuild) and runs it once more.
func (s Store) try(ctx context.Context, r inventory.Reservation) (int, error) {
	args := []any{r.Qty, r.Deadline.UnixMilli(), r.OrderID, r.Buyer, r.Limit}
	if s.Fence == nil {
		return tryScript.Run(ctx, s.R, keys(r.SKU, r.OrderID), args...).Int()
	}
	n, err := s.R.EvalSha(ctx, tryScript.Hash(), keys(r.SKU, r.OrderID), args...).Int()
	if !isNoScript(err) {
		return n, err
	}
	if s.Fence.Drain != nil {
		return 0, ErrFenced
	}
	if err := s.Ready(ctx); err != nil {
		return 0, err
	}
	return s.R.EvalSha(ctx, tryScript.Hash(), keys(r.SKU, r.OrderID), args...).Int()
}

// Loaded reports whether Redis holds the Try script (no restart since the
// last rebuild, or the first arming).
func (s Store) Loaded(ctx context.Context) (bool, error) { return s.loaded(ctx) }

// loaded reports whether Redis holds the Try script.
func (s Store) loaded(ctx context.Context) (bool, error) {
	ok, err := s.R.ScriptExists(ctx, tryScript.Hash()).Result()
	if err != nil {
		return false, fmt.Errorf("redis fence: %w", err)
	}
	return len(ok) == 1 && ok[0], nil
}

// Ready makes sure Redis holds the Try script, rebuilding every SKU's
// stock from MySQL first when it does not (see Fence). A Store without a
// fence is always ready. On a gated fence the rebuild is a round (see
// Fence) run by a goroutine of its own, which goes on when ctx ends (the
// gate stays closed until the round is over, so nothing this member
// decides can slip past its drain); Ready waits for it, or for ctx.
func (s Store) Ready(ctx context.Context) error {
	f := s.Fence
	if f == nil {
		return nil
	}
	if f.Drain != nil {
		return s.readyGated(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, err := s.loaded(ctx)
	if err != nil || ok {
		return err // loaded: no restart since, or another caller rebuilt
	}
	return s.rebuildAndLoad(ctx)
}

// rebuildAndLoad rebuilds every SKU from MySQL and loads the Try script.
func (s Store) rebuildAndLoad(ctx context.Context) error {
	f := s.Fence
	if err := s.Rebuild(ctx, f.DB); err != nil {
		return fmt.Errorf("redis fence: %w", err)
	}
	if err := tryScript.Load(ctx, s.R).Err(); err != nil {
		return fmt.Errorf("redis fence: load try: %w", err)
	}
	f.rebuilds.Add(1)
	if f.OnRebuild != nil {
		f.OnRebuild()
	}
	return nil
}

// readyGated is Ready on a gated fence.
func (s Store) readyGated(ctx context.Context) error {
	f := s.Fence
	f.mu.Lock()
	r := f.round
	f.mu.Unlock()
	if r == nil {
		ok, err := s.loaded(ctx)
		if err != nil {
			return err
		}
		if ok {
			// Redis is rebuilt; this member may have missed the round.
			late, _, err := f.late(ctx)
			if err != nil || !late {
				return err
			}
		}
		f.mu.Lock()
		if r = f.round; r == nil {
			if f.life == nil {
				f.life, f.stop = context.WithCancel(context.Background())
			}
			r = &round{done: make(chan struct{})}
			f.round = r
			go s.runRound(f.life, r)
		}
		f.mu.Unlock()
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("%w: waiting for the rebuild round: %w", ErrFenced, ctx.Err())
	}
}

// runRound is one round's goroutine: it closes the gate (waiting for the
// operations inside to leave) and retries the round until it succeeds or
// life ends, then opens the gate.
func (s Store) runRound(life context.Context, r *round) {
	f := s.Fence
	defer func() {
		f.mu.Lock()
		f.round = nil
		f.mu.Unlock()
		close(r.done)
	}()
	// A member in a round is alive, and says so: Beat waits for the round,
	// and a drain may outlast the lease (its relay waiting on rows another
	// member's paused transaction holds); silent, it would be presumed
	// dead and the others would rebuild without its decisions.
	beating, stopBeat := context.WithCancel(life)
	defer stopBeat()
	go f.beatUntil(beating)
	if err := f.gate.close(life); err != nil {
		r.err = fmt.Errorf("redis fence: %w", err)
		return
	}
	defer f.gate.open()
	f.rounds.Add(1)
	for {
		err := s.roundOnce(life)
		if err == nil || life.Err() != nil {
			r.err = err
			return
		}
		// MySQL or Redis unreachable (Redis still restarting): the gate
		// stays closed, the round is tried again.
		if !clock.Sleep(life, pollStep) {
			r.err = err
			return
		}
	}
}

// roundOnce drains this member and, once every live member has drained
// for the round, rebuilds (the elected member) or waits for the Try
// script to be back (the others). A late member (see Fence) does not
// drain — its table's decisions were made on a Redis that is gone — but
// takes part (it may be the one that rebuilds), then catches up.
func (s Store) roundOnce(ctx context.Context) error {
	f := s.Fence
	late, _, err := f.late(ctx)
	if err != nil {
		return err
	}
	ok, err := s.loaded(ctx)
	if err != nil {
		return err
	}
	if late {
		if !ok {
			if err := s.await(ctx, false); err != nil {
				return err
			}
		}
		return s.catchUp(ctx)
	}
	if ok {
		return nil
	}
	if err := f.Drain(ctx); err != nil {
		return fmt.Errorf("redis fence: drain: %w", err)
	}
	if f.Member == "" {
		return s.rebuildAndLoad(ctx)
	}
	return s.await(ctx, true)
}

// errBecameLate: a round went on without this member while it drained.
var errBecameLate = errors.New("redis fence: a round went on without this member")

// await marks this member drained for the round (drained: it is not
// late), then waits until every other live member that is not late has
// marked it, and leads (lead), until the Try script is back.
func (s Store) await(ctx context.Context, drained bool) error {
	f := s.Fence
	for {
		var done int64
		if err := f.DB.QueryRowContext(ctx, "SELECT epoch FROM redis_fence WHERE instance=''").Scan(&done); err != nil {
			return fmt.Errorf("redis fence: read the epoch: %w", err)
		}
		epoch := done + 1
		if drained {
			// Marked only while not late: a member a round went on without
			// stays late (its epoch below the fence's) until it catches up.
			if _, err := f.DB.ExecContext(ctx, "INSERT INTO redis_fence (instance, epoch, beat) VALUES (?, ?, NOW(6)) ON DUPLICATE KEY UPDATE epoch=IF(epoch >= ?, GREATEST(epoch, VALUES(epoch)), epoch), beat=NOW(6)",
				f.Member, epoch, done); err != nil {
				return fmt.Errorf("redis fence: mark drained: %w", err)
			}
			if late, _, err := f.late(ctx); err != nil || late {
				return errors.Join(err, errBecameLate)
			}
		}
		if ok, err := s.loaded(ctx); err != nil || ok {
			return err // another member rebuilt
		}
		waiting, err := f.waiting(ctx, f.DB, done)
		if err != nil {
			return err
		}
		if waiting == 0 {
			if err := s.lead(ctx, epoch); err != nil {
				return err
			}
			continue // rebuilt, or another member led: look again
		}
		if !clock.Sleep(ctx, pollStep) {
			return ctx.Err()
		}
	}
}

// waiting counts the other live members not late (epoch at least done)
// that have not marked the round after done as drained.
func (f *Fence) waiting(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, done int64) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM redis_fence WHERE instance NOT IN ('', ?) AND epoch = ? AND beat > NOW(6) - INTERVAL ? MICROSECOND",
		f.Member, done, f.lease().Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("redis fence: members: %w", err)
	}
	return n, nil
}

// lead rebuilds for epoch under the fence row's lock, unless a member did
// it first (the epoch is done, or the Try script is back) or a member
// became due meanwhile (one that caught up: waiting). It counts as
// presumed dead the members neither drained for the round nor late
// before it.
func (s Store) lead(ctx context.Context, epoch int64) error {
	f := s.Fence
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("redis fence: lead: %w", err)
	}
	defer tx.Rollback()
	var done int64
	if err := tx.QueryRowContext(ctx, "SELECT epoch FROM redis_fence WHERE instance='' FOR UPDATE").Scan(&done); err != nil {
		return fmt.Errorf("redis fence: lead: %w", err)
	}
	if done >= epoch {
		return nil
	}
	if ok, err := s.loaded(ctx); err != nil || ok {
		return err
	}
	if n, err := f.waiting(ctx, tx, done); err != nil || n > 0 {
		return err // a member caught up meanwhile: it drains first
	}
	var dead int64
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM redis_fence WHERE instance NOT IN ('', ?) AND epoch = ?", f.Member, done).Scan(&dead); err != nil {
		return fmt.Errorf("redis fence: lead: %w", err)
	}
	if err := s.rebuildAndLoad(ctx); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE redis_fence SET epoch=? WHERE instance=''", epoch); err != nil {
		return fmt.Errorf("redis fence: lead: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redis fence: lead: %w", err)
	}
	f.dead.Add(dead)
	return nil
}

// errRebuiltAgain: Redis lost its data, or another round completed,
// while a late member caught up; it catches up again.
var errRebuiltAgain = errors.New("redis fence: rebuilt again during the catch-up")

// catchUp is a late member's replay (CatchUp) on the rebuilt Redis, gate
// closed; then its epoch is brought level with the fence's, under the
// fence row's shared lock and only if no round completed and Redis still
// holds the Try script — otherwise the round is tried again and the
// member, still late, replays again (the replay is idempotent).
func (s Store) catchUp(ctx context.Context) error {
	f := s.Fence
	_, done, err := f.late(ctx)
	if err != nil {
		return err
	}
	if f.CatchUp != nil {
		if err := f.CatchUp(ctx); err != nil {
			return fmt.Errorf("redis fence: catch up: %w", err)
		}
	}
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("redis fence: catch up: %w", err)
	}
	defer tx.Rollback()
	now, _, err := f.epochs(ctx, tx, true)
	if err != nil {
		return err
	}
	if ok, err := s.loaded(ctx); err != nil || !ok || now != done {
		return errors.Join(err, errRebuiltAgain)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE redis_fence SET epoch=?, beat=NOW(6) WHERE instance=?", done, f.Member); err != nil {
		return fmt.Errorf("redis fence: catch up: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("redis fence: catch up: %w", err)
	}
	f.catchUps.Add(1)
	return nil
}

// gate is a read-write lock whose waits honour a context: operations enter
// and leave it shared; a round closes it (no new operation enters, the
// ones inside are waited for) and opens it again. One closer at a time.
type gate struct {
	mu      sync.Mutex
	inside  int
	closed  bool
	changed chan struct{} // closed (and replaced) on every change
}

// wait returns the channel the next change closes; call with mu held.
func (g *gate) wait() <-chan struct{} {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// notify wakes every waiter; call with mu held.
func (g *gate) notify() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

func (g *gate) enter(ctx context.Context) error {
	for {
		g.mu.Lock()
		if !g.closed {
			g.inside++
			g.mu.Unlock()
			return nil
		}
		ch := g.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	g.inside--
	g.notify()
	g.mu.Unlock()
}

// close shuts the gate and waits until nobody is inside; if ctx ends
// first the gate is open again and ctx's error returned.
func (g *gate) close(ctx context.Context) error {
	g.mu.Lock()
	g.closed = true
	g.notify()
	for g.inside > 0 {
		ch := g.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.open()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
	return nil
}

func (g *gate) open() {
	g.mu.Lock()
	g.closed = false
	g.notify()
	g.mu.Unlock()
}

// Arm loads the Try script when the stock hashes were all just built from
// MySQL (a first start on an empty Redis): the rebuild Ready would run
// has nothing left to do. Without a fence it does nothing.
func (s Store) Arm(ctx context.Context) error {
	if s.Fence == nil {
		return nil
	}
	s.Fence.mu.Lock()
	defer s.Fence.mu.Unlock()
	if err := tryScript.Load(ctx, s.R).Err(); err != nil {
		return fmt.Errorf("redis fence: load try: %w", err)
	}
	return nil
}

// Rebuild rebuilds every SKU's stock hash from MySQL, the system of
// record: the hash is dropped and built again as Reload builds a missing
// one — total from MySQL, sold from its confirmed orders, MySQL's
// decisions given to the live reservations that missed them, occupied
// from every reservation still held (live in Redis, or reserved in MySQL
// and recorded again in Redis), available the rest. While a SKU's hash is
// missing its Trys fail (no stock hash) and its decisions wait for the new
// hash (finish.lua), so nothing in flight is counted twice or lost. A
// reservation only Redis held, acknowledged in the window the server lost,
// cannot be rebuilt: nothing else knew it.
func (s Store) Rebuild(ctx context.Context, db *sql.DB) error {
	skus, err := ListSKUs(ctx, db)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	for _, sku := range skus {
		if err := s.R.Del(ctx, inventory.RedisStockKey(sku), restockKey(sku)).Err(); err != nil {
			return fmt.Errorf("rebuild %s: %w", sku, err)
		}
		if _, err := s.Reload(ctx, db, sku); err != nil {
			return fmt.Errorf("rebuild %s: %w", sku, err)
		}
	}
	return nil
}
