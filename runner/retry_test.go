package runner_test

import (
	"context"
	"testing"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestServiceModelAndRetries: a flash of 300 buyers at once on a service
// of one call in flight and no queue sheds most of them; with client
// retries the shed come back with the same order id. Every attempt is
// counted, every buyer has one fate, the store holds one reservation per
// order (the audit is clean) and retries sell more than none.
func TestServiceModelAndRetries(t *testing.T) {
	e, err := registry.Lookup("lua-tcc")
	if err != nil {
		t.Fatal(err)
	}
	sold := map[int]int64{}
	for _, retries := range []int{0, 5} {
		o := flashOptions(1)
		o.Buyers, o.Stock = 300, 200
		o.Arrival = scenarios.AllAtOnce
		o.PayDelay = scenarios.Range{}
		o.Inflight, o.Queue = 1, -1
		o.ClientRetry = retries
		o.RetryBackoff = scenarios.Range{Min: 1e6, Max: 5e6} // 1-5 ms
		run, err := runner.RunStrategy(context.Background(), env.Conns, e, "flash", o)
		if err != nil {
			t.Fatal(err)
		}
		f, s := run.Flash, run.Service
		if f == nil || s == nil {
			t.Fatalf("no flash or service figures: %+v %+v", f, s)
		}
		c := run.Counts["reserve"]
		attempts := c["ok"] + c["out_of_stock"] + c["busy"]
		if attempts != int64(o.Buyers)+s.ClientRetries || c["busy"] != s.Shed {
			t.Fatalf("retries %d: reserve counts %v, %d retries, %d shed: every attempt once", retries, c, s.ClientRetries, s.Shed)
		}
		if retries == 0 && s.ClientRetries != 0 {
			t.Fatalf("retried %d times with --client-retry 0", s.ClientRetries)
		}
		if fates := f.Served + f.Refused + f.Shed + f.TimedOut + f.Abandoned + f.Failed; fates != int64(o.Buyers) || f.Buyers != int64(o.Buyers) {
			t.Fatalf("retries %d: fates %+v do not add up to %d buyers", retries, f, o.Buyers)
		}
		if run.Audit.Count() != 0 || run.Audit.ConfirmedUnits != f.Sold {
			t.Fatalf("retries %d: audit %+v, %d sold", retries, run.Audit, f.Sold)
		}
		sold[retries] = f.Sold
	}
	// Without retries a shed buyer leaves; with them it comes back, so a
	// sale that fell short without them sells more.
	if sold[0] < 200 && sold[5] <= sold[0] {
		t.Fatalf("sold %d with retries, %d without: the shed did not come back", sold[5], sold[0])
	}
	t.Logf("sold %d of 200 without retries, %d with", sold[0], sold[5])
}
