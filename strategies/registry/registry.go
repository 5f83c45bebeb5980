// Package registry maps strategy names, as used on the command line, to
// constructors. Adding a strategy means adding one entry here (and its
// directories to the go:generate line below); the conformance suite then
// runs against it.
package registry

//go:generate go run ../../internal/loc/cmd/corelines -root ../.. -o corelines_gen.go strategies/rowlock strategies/cas strategies/conditional strategies/luatcc strategies/luasplit strategies/outbox strategies/naive strategies/batched strategies/buckets strategies/skiplocked strategies/outboxlocal strategies/ensure strategies/luatcc/degrade.go strategies/luatcc/soldout.go strategies/internal/groupcommit strategies/internal/sqlstore strategies/internal/redisstock

import (
	"fmt"
	"strings"

	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/batched"
	"github.com/stockbench/stockbench/strategies/buckets"
	"github.com/stockbench/stockbench/strategies/cas"
	"github.com/stockbench/stockbench/strategies/conditional"
	"github.com/stockbench/stockbench/strategies/ensure"
	"github.com/stockbench/stockbench/strategies/luasplit"
	"github.com/stockbench/stockbench/strategies/luatcc"
	"github.com/stockbench/stockbench/strategies/naive"
	"github.com/stockbench/stockbench/strategies/null"
	"github.com/stockbench/stockbench/strategies/outbox"
	"github.com/stockbench/stockbench/strategies/outboxlocal"
	"github.com/stockbench/stockbench/strategies/rowlock"
	"github.com/stockbench/stockbench/strategies/skiplocked"
)

// Entry describes one strategy.
type Entry struct {
	Name string
	// Dirs are the directories of the strategy's code, relative to the
	// module root: its own package first, then the shared internal packages
	// it builds on (all are counted as its core lines).
	Dirs []string
	// Optional is code of the strategy that runs only when an option
	// turns it on (lua-tcc's degradation switch): counted in its core
	// lines only for a run with the option on.
	Optional []Optional
	// Safe is false for naive: it is exempt from the safety cases and must
	// instead show the anomaly.
	Safe bool
	// UsesRedis says whether the strategy needs a Redis server (and keeps
	// stock there, which the auditor then checks).
	UsesRedis bool
	// RedisReservations says the strategy keeps reservations only in Redis
	// until they are decided (the auditor's RedisReservations).
	RedisReservations bool
	// Ceiling names the calibration probe that bounds the strategy's
	// reserve: the store operation its reserve is shaped like.
	Ceiling string
	// Probe marks a harness-cost probe (null): not a strategy, never
	// audited nor ranked, outside All.
	Probe bool
	New   func(strategies.Config) (strategies.Strategy, error)
}

func wrap[T strategies.Strategy](f func(strategies.Config) T) func(strategies.Config) (strategies.Strategy, error) {
	return func(c strategies.Config) (strategies.Strategy, error) { return f(c), nil }
}

func wrapErr[T strategies.Strategy](f func(strategies.Config) (T, error)) func(strategies.Config) (strategies.Strategy, error) {
	return func(c strategies.Config) (strategies.Strategy, error) { return f(c) }
}

// All lists every strategy in the order reports show them.
var All = []Entry{
	{Name: "rowlock", Dirs: []string{"strategies/rowlock", sqlDir}, Safe: true, Ceiling: CeilingMySQLTxn, New: wrap(rowlock.New)},
	{Name: "cas", Dirs: []string{"strategies/cas", sqlDir}, Safe: true, Ceiling: CeilingMySQLUpdate, New: wrapErr(cas.New)},
	{Name: "conditional", Dirs: []string{"strategies/conditional", sqlDir}, Safe: true, Ceiling: CeilingMySQLUpdate, New: wrap(conditional.New)},
	{Name: "lua-tcc", Dirs: []string{"strategies/luatcc", gcDir, sqlDir, redisDir}, Optional: []Optional{{File: "strategies/luatcc/degrade.go", On: func(c strategies.Config) bool { return c.Degrade != "" }},
		{File: "strategies/luatcc/soldout.go", On: func(c strategies.Config) bool { return c.SoldOutFlag > 0 }}}, Safe: true, UsesRedis: true, RedisReservations: true, Ceiling: CeilingRedis, New: wrapErr(luatcc.New)},
	{Name: luasplit.Name, Dirs: []string{"strategies/luasplit", sqlDir, redisDir}, Safe: true, UsesRedis: true, RedisReservations: true, Ceiling: CeilingRedis, New: wrapErr(luasplit.New)},
	{Name: "outbox", Dirs: []string{"strategies/outbox", sqlDir, redisDir}, Safe: true, UsesRedis: true, Ceiling: CeilingRedis, New: wrapErr(outbox.New)},
	{Name: "outbox-local", Dirs: []string{"strategies/outboxlocal", gcDir, sqlDir, redisDir}, Safe: true, UsesRedis: true, RedisReservations: true, Ceiling: CeilingRedis, New: wrapErr(outboxlocal.New)},
	{Name: ensure.Name, Dirs: []string{"strategies/ensure", gcDir, sqlDir, redisDir}, Safe: true, UsesRedis: true, RedisReservations: true, Ceiling: CeilingRedis, New: wrapErr(ensure.New)},
	{Name: "batched", Dirs: []string{"strategies/batched", "strategies/conditional", gcDir, sqlDir}, Safe: true, Ceiling: CeilingMySQLUpdate, New: wrap(batched.New)},
	{Name: "buckets", Dirs: []string{"strategies/buckets", sqlDir}, Safe: true, Ceiling: CeilingMySQLTxn, New: wrap(buckets.New)},
	{Name: "skiplocked", Dirs: []string{"strategies/skiplocked", sqlDir}, Safe: true, Ceiling: CeilingMySQLTxn, New: wrap(skiplocked.New)},
	{Name: "naive", Dirs: []string{"strategies/naive"}, Safe: false, Ceiling: CeilingMySQLUpdate, New: wrap(naive.New)},
}

// Probes are the harness-cost probes: named on the command line like a
// strategy (--strategies null), never part of "all", of make bench or of
// the conformance suite, never audited nor ranked.
var Probes = []Entry{
	{Name: null.Name, Probe: true, New: wrap(null.New)},
}

// Calibration probes a strategy can be compared with.
const (
	CeilingRedis       = "redis_evalsha_ops"
	CeilingMySQLUpdate = "mysql_hot_update_ops"
	CeilingMySQLTxn    = "mysql_hot_txn_ops"
)

const (
	sqlDir   = "strategies/internal/sqlstore"
	redisDir = "strategies/internal/redisstock"
	gcDir    = "strategies/internal/groupcommit"
)

// Optional is a file of a strategy's code that runs only when On says
// the option is on in the strategy's configuration.
type Optional struct {
	File string // relative to the module root
	On   func(strategies.Config) bool
}

// CoreLines is the size of the strategy's code: the non-blank, non-comment
// lines of its directories, counted at build time (corelines_gen.go),
// without its optional files.
func (e Entry) CoreLines() int {
	n := 0
	for _, d := range e.Dirs {
		n += coreLines[d]
	}
	return n
}

// CoreLinesFor is the size of the code a run of the strategy with cfg
// runs: CoreLines plus the optional files cfg turns on.
func (e Entry) CoreLinesFor(cfg strategies.Config) int {
	n := e.CoreLines()
	for _, o := range e.Optional {
		if o.On(cfg) {
			n += coreLines[o.File]
		}
	}
	return n
}

// Names lists every strategy name.
func Names() []string {
	out := make([]string, len(All))
	for i, e := range All {
		out[i] = e.Name
	}
	return out
}

// Lookup finds a strategy by name.
func Lookup(name string) (Entry, error) {
	for _, e := range append(All[:len(All):len(All)], Probes...) {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("unknown strategy %q (known: %s; probe: null)", name, strings.Join(Names(), ", "))
}

// Parse turns a comma-separated list ("all" for every strategy) into entries,
// rejecting unknown and repeated names.
func Parse(list string) ([]Entry, error) {
	if strings.TrimSpace(list) == "all" {
		return All, nil
	}
	var out []Entry
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if seen[n] {
			return nil, fmt.Errorf("strategy %q named twice", n)
		}
		seen[n] = true
		e, err := Lookup(n)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no strategy named (known: %s)", strings.Join(Names(), ", "))
	}
	return out, nil
}
