package strategies_test

import (
	"testing"

	"github.com/stockbench/stockbench/strategies/registry"
)

// TestConformanceSoldOut runs the conformance suite again on lua-tcc with
// its in-process sold-out flag on (--soldout-flag), its life longer than
// any case: a flag raised by an out-of-stock answer must be lowered by
// the release that gives stock back (cancel, expiry, refund, restock), and
// a repeated reserve of an order already reserved must still get its one
// outcome, or a case fails.
func TestConformanceSoldOut(t *testing.T) {
	t.Setenv("STOCKBENCH_TEST_SOLDOUT", "1h")
	e, err := registry.Lookup("lua-tcc")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, e) })
	}
}
