package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/stockbench/stockbench/audit"
)

// auditWithin is one audit as a phase of a run: a reads the stores
// against acks within deadline, its progress drawn on ps; check, when
// given, runs on the result inside the same deadline. The phase is
// recorded in ps (incomplete on an error), and the error names the phase
// and its deadline. A single run's audits and the merged audit of several
// generators are both this.
func auditWithin(ps *phases, name string, a audit.Auditor, acks audit.AckSource, deadline time.Duration,
	check func(context.Context, *audit.Audit) error) (audit.Audit, error) {
	ph := ps.start(name, "SKUs+acks", 0)
	a.Progress = func(done, total int64) { ph.set(done, total) }
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	res, err := a.AuditFrom(ctx, acks)
	if err == nil && check != nil {
		err = check(ctx, &res)
	}
	ph.end(err != nil)
	if err != nil {
		return res, fmt.Errorf("%s (deadline %s): %w", name, deadline, err)
	}
	return res, nil
}
