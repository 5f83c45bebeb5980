package runner

import (
	"context"
	"io"

	"github.com/stockbench/stockbench/servers"
)

// The start barrier's pieces, for the external test package's tests on
// real Redis (barrier_test.go).
var (
	Released     = released
	WatchBarrier = watchBarrier
)

// Revive is bench.revive on these pools and servers, logging to log.
func Revive(ctx context.Context, c servers.Conns, f servers.Faulter, log io.Writer) {
	(&bench{conns: c, faulter: f}).revive(ctx, Options{Log: log})
}
