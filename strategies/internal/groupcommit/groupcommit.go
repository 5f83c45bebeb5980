// Package groupcommit coalesces concurrent writes to one hot key (a SKU)
// into batches, so that N callers share one transaction instead of queueing
// N transactions on the same row lock.
//
// The first caller for a key becomes the batch's leader; callers arriving
// while a batch runs queue behind it and the next batch takes them all (up
// to Max). A leader may also wait up to Wait for company before running.
// After its batch the leader hands leadership to the first queued caller,
// so nobody serves other people's batches for longer than one batch.
//
// Each caller gets its own result, delivered after the batch's commit. When
// the batch as a whole fails (the transaction rolled back), every item is
// run again on its own with One, so no caller ever gets another's error.
// Batch may also leave single items out of a batch that otherwise commits
// (ErrAlone): their callers run them with One once the batch has committed.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Group coalesces calls of Do that share a key. Set the fields before the
// first Do and do not change them afterwards; Do is safe for concurrent use.
// The zero Max (or 1) turns coalescing off: every call runs One.
//
// Batch and One must be idempotent per item in this sense: after a Batch
// whose outcome is unknown (a lost commit answer), One runs each item again,
// and must then find and report what the batch did.
type Group[T any] struct {
	// Max is the largest batch.
	Max int
	// Wait is how long a leader waits for its batch to fill before running
	// it; 0 runs at once with whoever queued behind the previous batch.
	Wait time.Duration
	// Batch runs items (all of key, in arrival order, len ≥ 2) as one unit:
	// either it returns one result per item (nil = success for that item)
	// and a nil error, or a non-nil error meaning nothing the results would
	// have said holds and every item is to be run again with One. A result
	// that is ErrAlone says the batch did nothing for that item (an unusual
	// case the batch leaves to the per-item path, or a repeat of an item
	// already in the batch): its caller then runs it with One, after the
	// batch's commit, so the others need not fail for it.
	Batch func(ctx context.Context, key string, items []T) ([]error, error)
	// One runs a single item on its own. It never returns ErrAlone.
	One func(ctx context.Context, key string, item T) error
	// After, when set, runs after a Batch that succeeded, with the items
	// and Batch's results, once leadership has passed on — so the next
	// batch of the key commits meanwhile — and before any caller of the
	// batch gets its result. It is for work that follows the commit and
	// may be slow (bringing a cache in line), which the per-item path does
	// in One.
	After func(ctx context.Context, key string, items []T, results []error)

	mu    sync.Mutex
	keys  map[string]*queue[T]
	sizes []int64 // sizes[n] = batches of n items (n ≥ 1)
	fall  int64   // batches that failed and were retried item by item
}

// ErrAlone is the result Batch gives an item it left out of the batch: the
// caller runs that item with One once the batch has committed.
var ErrAlone = errors.New("group commit: item left to run alone")

type queue[T any] struct {
	pending []*call[T]
	running bool
	full    chan struct{} // signalled when pending reaches Max
}

type callState int

const (
	queued callState = iota
	leading
	taken
)

type call[T any] struct {
	ctx   context.Context
	item  T
	state callState
	// ch receives one message: nil error with lead=true (lead the next
	// batch), or the call's result.
	ch chan msg
}

type msg struct {
	lead bool
	err  error
}

// Do runs item as part of a batch of key and returns its own result, after
// the commit that decided it. If ctx ends while the call is still queued it
// returns ctx's error and the item is not run; once its batch has started,
// the call waits for the batch's outcome (the batch runs under a context
// that keeps the latest deadline of its members).
func (g *Group[T]) Do(ctx context.Context, key string, item T) error {
	return g.DoQueued(ctx, key, item, nil)
}

// DoQueued is Do that calls onQueued (when not nil) once the item holds
// its place in key's queue: items of one key queued one after another (a
// caller's onQueued returning before the next caller's Do starts) run in
// that order, in one batch or in consecutive ones — unless a batch fails
// as a whole and its items are run again one by one, or a caller leaves
// the queue (its context ending first). Without coalescing (Max ≤ 1)
// onQueued is called once the item has run.
func (g *Group[T]) DoQueued(ctx context.Context, key string, item T, onQueued func()) error {
	if g.Max <= 1 {
		g.record(1, false)
		err := g.One(ctx, key, item)
		if onQueued != nil {
			onQueued()
		}
		return err
	}
	c := &call[T]{ctx: ctx, item: item, ch: make(chan msg, 1)}
	g.mu.Lock()
	if g.keys == nil {
		g.keys = map[string]*queue[T]{}
	}
	q := g.keys[key]
	if q == nil {
		q = &queue[T]{full: make(chan struct{}, 1)}
		g.keys[key] = q
	}
	q.pending = append(q.pending, c)
	if len(q.pending) >= g.Max {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
	lead := !q.running
	if lead {
		q.running = true
		c.state = leading
	}
	g.mu.Unlock()
	if onQueued != nil {
		onQueued()
	}
	for !lead {
		select {
		case m := <-c.ch:
			if !m.lead {
				return g.alone(ctx, key, item, m.err)
			}
			lead = true
		case <-ctx.Done():
			g.mu.Lock()
			switch c.state {
			case queued:
				q.pending = slices.DeleteFunc(q.pending, func(x *call[T]) bool { return x == c })
				g.mu.Unlock()
				return fmt.Errorf("group commit: %w", ctx.Err())
			case leading:
				// Leadership arrived with the cancellation: pass it on.
				<-c.ch
				q.pending = slices.DeleteFunc(q.pending, func(x *call[T]) bool { return x == c })
				g.handOff(q)
				g.mu.Unlock()
				return fmt.Errorf("group commit: %w", ctx.Err())
			}
			g.mu.Unlock()
			m := <-c.ch // taken: the batch decides
			return g.alone(ctx, key, item, m.err)
		}
	}
	return g.alone(ctx, key, item, g.lead(ctx, key, q, c))
}

// alone runs item with One if its batch left it out (err is ErrAlone), on the
// caller's own goroutine and context; any other err is the item's result.
func (g *Group[T]) alone(ctx context.Context, key string, item T, err error) error {
	if !errors.Is(err, ErrAlone) {
		return err
	}
	return g.One(ctx, key, item)
}

// lead forms and runs one batch that includes c, delivers every result, and
// hands leadership on.
func (g *Group[T]) lead(ctx context.Context, key string, q *queue[T], c *call[T]) error {
	if g.Wait > 0 {
		g.mu.Lock()
		// A signal left from before this batch is stale: drop it, and
		// look at the queue as it is now.
		select {
		case <-q.full:
		default:
		}
		ready := len(q.pending) >= g.Max
		g.mu.Unlock()
		if !ready {
			t := time.NewTimer(g.Wait)
			select {
			case <-t.C:
			case <-q.full:
			case <-ctx.Done():
			}
			t.Stop()
		}
	}
	g.mu.Lock()
	n := min(len(q.pending), g.Max)
	batch := slices.Clone(q.pending[:n])
	q.pending = slices.Delete(q.pending, 0, n)
	for _, b := range batch {
		b.state = taken
	}
	g.mu.Unlock()

	results, batched, fellBack := g.run(key, batch)
	g.record(len(batch), fellBack)
	g.mu.Lock()
	g.handOff(q)
	g.mu.Unlock()
	if batched && g.After != nil {
		items := make([]T, len(batch))
		for i, b := range batch {
			items[i] = b.item
		}
		g.After(context.WithoutCancel(batch[0].ctx), key, items, results)
	}

	var mine error
	for i, b := range batch {
		if b == c {
			mine = results[i]
			continue
		}
		b.ch <- msg{err: results[i]}
	}
	return mine
}

// handOff makes the first queued call the next leader, or marks the key
// idle. g.mu must be held.
func (g *Group[T]) handOff(q *queue[T]) {
	if len(q.pending) == 0 {
		q.running = false
		return
	}
	next := q.pending[0]
	next.state = leading
	next.ch <- msg{lead: true}
}

// run executes batch: with One for a single item, else with Batch, falling
// back to One per item when the batch fails. batched reports that Batch
// succeeded.
func (g *Group[T]) run(key string, batch []*call[T]) (results []error, batched, fellBack bool) {
	ctx, cancel := batchContext(batch)
	defer cancel()
	results = make([]error, len(batch))
	if len(batch) == 1 {
		results[0] = g.One(ctx, key, batch[0].item)
		return results, false, false
	}
	items := make([]T, len(batch))
	for i, b := range batch {
		items[i] = b.item
	}
	res, err := g.Batch(ctx, key, items)
	if err == nil && len(res) == len(batch) {
		return res, true, false
	}
	// The batch failed as a whole: no item may get its error. Run each on
	// its own, under its own context.
	for i, b := range batch {
		results[i] = g.One(b.ctx, key, b.item)
	}
	return results, false, true
}

// batchContext keeps the values of the first member's context, and ends at
// the latest deadline of the members (never, if one has none): a member
// whose own context ends must not fail the others.
func batchContext[T any](batch []*call[T]) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, b := range batch {
		d, ok := b.ctx.Deadline()
		if !ok {
			return context.WithCancel(base)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}

func (g *Group[T]) record(n int, fellBack bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.sizes) <= n {
		g.sizes = append(g.sizes, 0)
	}
	g.sizes[n]++
	if fellBack {
		g.fall++
	}
}

// Stats are the batch sizes seen so far.
type Stats struct {
	// Batches is how many batches ran (a call run alone is a batch of 1).
	Batches int64
	// Items is how many calls they carried.
	Items int64
	// Min, Median, P90 and Max are batch sizes.
	Min, Median, P90, Max int
	// Fallbacks is how many batches failed and were retried item by item.
	Fallbacks int64
}

// Stats returns a snapshot of the batch sizes. Safe for concurrent use.
func (g *Group[T]) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Stats{Fallbacks: g.fall}
	for n, k := range g.sizes {
		s.Batches += k
		s.Items += int64(n) * k
	}
	if s.Batches == 0 {
		return s
	}
	quantile := func(q float64) int {
		rank := int64(q*float64(s.Batches-1)) + 1
		var seen int64
		for n, k := range g.sizes {
			seen += k
			if seen >= rank {
				return n
			}
		}
		return len(g.sizes) - 1
	}
	s.Min, s.Median, s.P90 = quantile(0), quantile(0.5), quantile(0.9)
	for n := len(g.sizes) - 1; n >= 0; n-- {
		if g.sizes[n] > 0 {
			s.Max = n
			break
		}
	}
	return s
}

// Counters returns the stats as results.json counters named
// prefix_batches, prefix_batch_size_min/_p50/_p90/_max/_mean and
// prefix_batch_fallbacks.
func (s Stats) Counters(prefix string) map[string]float64 {
	m := map[string]float64{
		prefix + "_batches":         float64(s.Batches),
		prefix + "_batch_size_min":  float64(s.Min),
		prefix + "_batch_size_p50":  float64(s.Median),
		prefix + "_batch_size_p90":  float64(s.P90),
		prefix + "_batch_size_max":  float64(s.Max),
		prefix + "_batch_fallbacks": float64(s.Fallbacks),
	}
	if s.Batches > 0 {
		m[prefix+"_batch_size_mean"] = float64(s.Items) / float64(s.Batches)
	}
	return m
}
