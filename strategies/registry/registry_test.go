package registry

import (
	"slices"
	"testing"

	"github.com/stockbench/stockbench/internal/loc"
)

// TestCoreLinesCurrent fails when corelines_gen.go no longer matches the
// source: the counts the binary reports must be those of its own code.
func TestCoreLinesCurrent(t *testing.T) {
	var dirs []string
	for _, e := range All {
		for _, d := range e.Dirs {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	// The test runs in this package's directory; the module root is two up.
	now, err := loc.Counts("../..", dirs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if got, ok := coreLines[d]; !ok || got != now[d] {
			t.Errorf("%s: generated %d core lines (listed %v), source has %d: list the directory on registry.go's go:generate line if it is not, and run go generate ./strategies/registry", d, got, ok, now[d])
		}
	}
	if len(coreLines) != len(dirs) {
		t.Errorf("corelines_gen.go has %d directories, the registry uses %d: run go generate ./strategies/registry", len(coreLines), len(dirs))
	}
	for _, e := range All {
		if e.CoreLines() == 0 {
			t.Errorf("%s: 0 core lines", e.Name)
		}
	}
}
