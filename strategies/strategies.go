// Package strategies holds what every strategy package shares: the Strategy
// interface (strategy.go) and the Config a strategy is built from, with its
// Defaults. Each strategy lives in its own sub-package; the
// registry sub-package maps CLI names to constructors, and the conformance
// suite (conformance_test.go) runs every registered strategy against real
// MySQL and Redis.
package strategies

import (
	"database/sql"
	"time"

	"github.com/redis/go-redis/v9"
)

// Config is what a strategy is built from. DB and Redis are shared
// connection pools owned by the caller; strategies never close them.
type Config struct {
	DB    *sql.DB
	Redis redis.UniversalClient
	// SweepPeriod is how often expired reservations are looked for.
	SweepPeriod time.Duration
	// CASRetry is "backoff" (exponential with full jitter) or "immediate".
	CASRetry string
	// CASMaxAttempts bounds the optimistic attempts of one reserve.
	CASMaxAttempts int
	// CASMaxWait, when positive, bounds the total time of one cas reserve
	// retrying with backoff (it is always bounded by its context's
	// deadline); past it the reserve gives up with ErrConflict.
	CASMaxWait time.Duration
	// OutboxPeriod is how often the outbox relay polls the message table
	// (and ensure's worker its stock-change log, besides the wake-up each
	// log row it commits gives it).
	OutboxPeriod time.Duration
	// ReconcilePeriod is how often the outbox reconciler compares Redis with
	// the MySQL projection (and applies decisions Redis missed), and how
	// often ensure's retry job re-applies the log rows left unsynced for
	// longer than OpTimeout (the article's hourly job).
	ReconcilePeriod time.Duration
	// OpTimeout is the longest an operation may run: the bound of an
	// in-flight write that the reconcilers must wait out before they treat
	// a difference as lasting, and the timeout of a compensation that runs
	// on its own context after the caller's has ended.
	OpTimeout time.Duration
	// Retain is how long Redis keeps a final reservation record, the window
	// in which repeats and late Trys are recognised.
	Retain time.Duration
	// BatchMax bounds how many concurrent writes to one SKU the group
	// commit of batched (and lua-tcc's confirm) coalesces into one
	// transaction; 1 turns coalescing off.
	BatchMax int
	// BatchWait is how long a batch waits to fill before it runs; 0 adds no
	// wait (a batch takes whoever queued while the previous one ran).
	BatchWait time.Duration
	// Buckets is how many rows the buckets strategy spreads each SKU's
	// stock over (default 8: enough rows for the buyers of a hot SKU to
	// lock different ones on a small server, few enough that a 100-unit
	// sale keeps about 12 units per bucket and false sold-outs stay rare).
	Buckets int
	// Isolation is the level the run asked of the MySQL sessions the
	// strategy's DB opens (rc, rr; empty: the server's default), recorded
	// here for the report: the runner sets it on the pool (servers.
	// WithIsolation), so a transaction begun without a level of its own
	// runs at it, and a strategy that chose a level per transaction (the
	// outbox relay, buckets, skiplocked: READ COMMITTED) keeps its choice.
	Isolation string
	// LocalDir is the directory of outbox-local's embedded message
	// database (one file per service instance directory): the instance's
	// state directory. A restarted instance given the same directory
	// relays its predecessor's backlog before it serves (Setup), so a
	// service (`stockbench serve`) keeps one stable directory per instance
	// here. One live instance per directory at a time. Empty: a fresh
	// temporary directory per instance, removed at Close (nothing to
	// resume).
	LocalDir string
	// LocalFailing, when set, is the local-fail fault's switch: while it
	// returns true, outbox-local's local table takes no write (each
	// blocks until the switch is off or its operation's deadline passes,
	// then fails). Safe for concurrent calls; nil: never failing.
	LocalFailing func() bool
	// Degrade is lua-tcc's degradation switch: "mysql" moves a SKU's
	// authority to MySQL rows while Redis fails (DegradeErrors failures
	// within a second, a call past DegradeTimeout counting as one) and
	// back once Redis answers again and was rebuilt from MySQL; "" (the
	// default) keeps every sale in Redis.
	Degrade string
	// DegradeTimeout bounds each Redis call of a strategy with Degrade on.
	DegradeTimeout time.Duration
	// DegradeErrors is how many Redis failures within a second trip the
	// switch.
	DegradeErrors int
	// SoldOutFlag, when positive, is lua-tcc's in-process sold-out flag
	// (--soldout-flag): a SKU whose reserve answered out of stock is
	// refused without a Redis round trip until stock comes back (this
	// process's release, or its next recovery pass seeing units
	// available), for at most this long. 0: off.
	SoldOutFlag time.Duration
}

// Defaults are the documented defaults of every knob: WithDefaults fills
// unset fields from them and the CLI's flags show them, so they are written
// once (a function, so no caller can change them for everyone).
func Defaults() Config { return defaults }

var defaults = Config{
	SweepPeriod:     500 * time.Millisecond,
	CASRetry:        "backoff",
	CASMaxAttempts:  200,
	OutboxPeriod:    time.Second,
	ReconcilePeriod: time.Second,
	OpTimeout:       10 * time.Second,
	Retain:          time.Hour,
	BatchMax:        64,
	Buckets:         8,
	DegradeTimeout:  300 * time.Millisecond,
	DegradeErrors:   3,
}

// WithDefaults fills unset fields with Defaults.
func (c Config) WithDefaults() Config {
	d := defaults
	if c.SweepPeriod <= 0 {
		c.SweepPeriod = d.SweepPeriod
	}
	if c.CASRetry == "" {
		c.CASRetry = d.CASRetry
	}
	if c.CASMaxAttempts <= 0 {
		c.CASMaxAttempts = d.CASMaxAttempts
	}
	if c.OutboxPeriod <= 0 {
		c.OutboxPeriod = d.OutboxPeriod
	}
	if c.ReconcilePeriod <= 0 {
		c.ReconcilePeriod = d.ReconcilePeriod
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = d.OpTimeout
	}
	if c.Retain <= 0 {
		c.Retain = d.Retain
	}
	if c.BatchMax <= 0 {
		c.BatchMax = d.BatchMax
	}
	if c.Buckets <= 0 {
		c.Buckets = d.Buckets
	}
	if c.DegradeTimeout <= 0 {
		c.DegradeTimeout = d.DegradeTimeout
	}
	if c.DegradeErrors <= 0 {
		c.DegradeErrors = d.DegradeErrors
	}
	if c.BatchWait < 0 {
		c.BatchWait = 0
	}
	return c
}
