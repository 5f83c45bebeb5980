package registry

import (
	"slices"
	"testing"

	"github.com/stockbench/stockbench/internal/loc"
	"github.com/stockbench/stockbench/strategies"
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
		for _, o := range e.Optional {
			if !slices.Contains(dirs, o.File) {
				dirs = append(dirs, o.File)
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

// TestProbesApart: a harness-cost probe is found by name but never in
// "all" (so never in make bench nor the conformance suite, which range
// over All), and every probe is marked as one.
func TestProbesApart(t *testing.T) {
	for _, p := range Probes {
		if !p.Probe {
			t.Errorf("%s: in Probes but not marked Probe", p.Name)
		}
		e, err := Lookup(p.Name)
		if err != nil || !e.Probe {
			t.Errorf("Lookup(%q) = %+v, %v: want the probe", p.Name, e.Name, err)
		}
		all, err := Parse("all")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			if a.Name == p.Name || a.Probe {
				t.Errorf("Parse(all) holds the probe %s", a.Name)
			}
		}
		named, err := Parse("rowlock," + p.Name)
		if err != nil || len(named) != 2 || !named[1].Probe {
			t.Errorf("Parse(rowlock,%s) = %v, %v", p.Name, named, err)
		}
	}
	if len(Probes) == 0 {
		t.Error("no probes: the null strategy measures the generator's own cost")
	}
}

// TestCoreLinesForOptions: an option's code counts only in runs that turn
// it on (lua-tcc's degradation switch).
func TestCoreLinesForOptions(t *testing.T) {
	e, err := Lookup("lua-tcc")
	if err != nil {
		t.Fatal(err)
	}
	off, on := e.CoreLinesFor(strategies.Config{}), e.CoreLinesFor(strategies.Config{Degrade: "mysql"})
	if off != e.CoreLines() || on != off+coreLines["strategies/luatcc/degrade.go"] || on <= off {
		t.Errorf("lua-tcc core lines: off %d (CoreLines %d), on %d", off, e.CoreLines(), on)
	}
}
