package strategies_test

import (
	"testing"

	"github.com/stockbench/stockbench/strategies/registry"
)

// TestConformanceDegrade runs the conformance suite again on lua-tcc with
// its degradation switch on (--degrade mysql): with Redis answering, every
// operation goes through the switch's Redis path and must keep every rule
// the plain strategy keeps.
func TestConformanceDegrade(t *testing.T) {
	t.Setenv("STOCKBENCH_TEST_DEGRADE", "mysql")
	e, err := registry.Lookup("lua-tcc")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, e) })
	}
}
