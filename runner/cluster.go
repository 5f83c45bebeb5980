package runner

import (
	"context"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/servers"
)

// galeraMark is a reading of a Galera cluster's conflict counters, summed
// over its nodes (ok is false on a single server).
type galeraMark struct {
	cert, bf int64
	ok       bool
}

func markGalera(ctx context.Context, c servers.Conns) galeraMark {
	cert, bf, ok, err := c.GaleraCounters(ctx)
	return galeraMark{cert: cert, bf: bf, ok: ok && err == nil}
}

// galeraFigures are the certification failures and brute-force aborts
// between two marks: conflicts between primaries, which clients see as
// deadlocks (error 1213) and retry.
func galeraFigures(from, to galeraMark) (cert, bf *int64) {
	if !from.ok || !to.ok {
		return nil, nil
	}
	c, b := int64(to.cert-from.cert), int64(to.bf-from.bf)
	return &c, &b
}

// checkNodes adds to the audit each MySQL cluster node that disagrees with
// the first once the run has settled: replication must leave every primary
// with the same stock and orders.
func checkNodes(ctx context.Context, c servers.Conns, a *audit.Audit) error {
	diffs, err := c.NodeDisagreement(ctx)
	if err != nil {
		return err
	}
	a.AddViolations(diffs)
	return nil
}
