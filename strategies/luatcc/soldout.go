package luatcc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
)

// soldOut is the in-process sold-out flag (--soldout-flag TTL, the field's
// flash-sale technique; docs/lua-tcc-soldout.md): once a reserve of a SKU
// answers out of stock, later reserves of it are refused in this process
// without a Redis round trip, until the flag clears. It clears
//   - in this process, at once, when this process returns stock to the
//     SKU: a cancel, a refund or a restock that succeeded, an expiry pass
//     that released a unit;
//   - in every process, at its next recovery pass (every SweepPeriod) when
//     the pass's glance at the SKU's stock hash, read anyway, shows units
//     available — so a unit another instance released is resold here
//     within one pass;
//   - with --degrade, when the switch's pass expires reservations held in
//     MySQL (every flag: the pass does not say which SKUs);
//   - at the latest TTL after it was set.
//
// The undersell it risks: a buyer turned away while the flag is up and a
// unit has already come back (at most one recovery pass, or the TTL if
// passes stall). A reserve that answers out of stock sets the flag only if
// no clear happened since that reserve began (gen), so a release racing
// the refusal is not hidden.
//
// A repeated reserve of an order this process reserved (or whose outcome
// it did not learn) is never refused by the flag: it goes to Redis and
// gets the order's one outcome (idempotent Try). A repeat that reaches
// another instance — or this one after a restart — may be refused by the
// flag while its reservation lives: the unit then returns at its deadline
// (undersell, never oversell). Safe for concurrent use.
type soldOut struct {
	ttl time.Duration

	mu    sync.Mutex
	flags map[string]flagState // by SKU
	// mine are the orders this process reserved (or may have), with their
	// deadlines: pruned once past them (a repeat after its deadline finds
	// a final record in Redis anyway).
	mine sync.Map // order id -> time.Time

	refused, raised, cleared atomic.Int64
}

// flagState is one SKU's flag: up until `until` (zero: down); gen counts
// the clears, so a refusal that raced a clear does not raise the flag.
type flagState struct {
	until time.Time
	gen   uint64
}

func newSoldOut(ttl time.Duration) *soldOut {
	return &soldOut{ttl: ttl, flags: map[string]flagState{}}
}

// errSoldOutFlag is the refusal answered from the flag.
var errSoldOutFlag = errors.New("sold-out flag up")

// before is called before r's reserve: refuse is true when the flag turns
// r away (without a round trip); otherwise gen is the SKU's clear count,
// for after.
func (f *soldOut) before(r inventory.Reservation) (refuse bool, gen uint64) {
	f.mu.Lock()
	st := f.flags[r.SKU]
	f.mu.Unlock()
	if !st.until.IsZero() && clock.Now().Before(st.until) {
		if _, repeat := f.mine.Load(r.OrderID); !repeat {
			f.refused.Add(1)
			return true, st.gen
		}
	}
	return false, st.gen
}

// after records r's reserve outcome err: out of stock raises the flag for
// TTL unless the SKU was cleared since gen; anything else (a reservation,
// or an outcome not known) makes r one of this process's orders.
func (f *soldOut) after(r inventory.Reservation, gen uint64, err error) {
	if !errors.Is(err, inventory.ErrOutOfStock) {
		f.mine.Store(r.OrderID, r.Deadline)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st := f.flags[r.SKU]; st.gen == gen {
		f.flags[r.SKU] = flagState{until: clock.Now().Add(f.ttl), gen: gen}
		f.raised.Add(1)
	}
}

// clear lowers sku's flag: stock came back. It counts as a clear for
// reserves in flight (gen) even when the flag is down.
func (f *soldOut) clear(sku string) {
	f.mu.Lock()
	st := f.flags[sku]
	if !st.until.IsZero() {
		f.cleared.Add(1)
	}
	f.flags[sku] = flagState{gen: st.gen + 1}
	f.mu.Unlock()
}

// clearAll lowers every flag (stock came back to SKUs not named).
func (f *soldOut) clearAll() {
	f.mu.Lock()
	for sku, st := range f.flags {
		if !st.until.IsZero() {
			f.cleared.Add(1)
		}
		f.flags[sku] = flagState{gen: st.gen + 1}
	}
	f.mu.Unlock()
}

// clearSeen is clear for a SKU this process has a flag entry for (the
// recovery pass glances at every SKU of the catalog; those never refused
// here need no entry).
func (f *soldOut) clearSeen(sku string) {
	f.mu.Lock()
	_, seen := f.flags[sku]
	f.mu.Unlock()
	if seen {
		f.clear(sku)
	}
}

// prune forgets the orders past their deadlines at now.
func (f *soldOut) prune(now time.Time) {
	f.mine.Range(func(k, v any) bool {
		if d, _ := v.(time.Time); !d.IsZero() && !now.Before(d) {
			f.mine.Delete(k)
		}
		return true
	})
}

// refusal is the error of a reserve the flag turned away.
func refusal(r inventory.Reservation) error {
	return fmt.Errorf("reserve %s: %w: %w", r.OrderID, errSoldOutFlag, inventory.ErrOutOfStock)
}

func (f *soldOut) counters(m map[string]float64) {
	m["soldout_flag_refused"] = float64(f.refused.Load())
	m["soldout_flag_raised"] = float64(f.raised.Load())
	m["soldout_flag_cleared"] = float64(f.cleared.Load())
}
