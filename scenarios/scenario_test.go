package scenarios

import (
	"slices"
	"testing"
)

// TestRegistry: each scenario is found by name, says its shape, and gives
// journeys or a stream (never both) on the catalog it names.
func TestRegistry(t *testing.T) {
	p := Params{Stock: 5, Buyers: 4, SKUs: 3, Mix: Mix{Confirm: 1}, Seed: 1}
	cases := []struct {
		name    string
		timed   bool
		catalog []string
		owns    string // a Params field only this scenario reads, or ""
	}{
		{"flash", false, []string{FlashSKU}, ""},
		{"race", false, []string{FlashSKU}, ""},
		{"sustained", true, []string{SKUName(0), SKUName(1), SKUName(2)}, "Skew"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, err := Lookup(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Timed() != c.timed || IsTimed(c.name) != c.timed {
				t.Fatalf("timed = %v, want %v", sc.Timed(), c.timed)
			}
			if got := sc.Catalog(p); !slices.Equal(got, c.catalog) {
				t.Fatalf("catalog %v, want %v", got, c.catalog)
			}
			gen, src := sc.Fixed(p), sc.Source(p, 0)
			if c.timed && (gen != nil || src == nil) || !c.timed && (gen == nil || src != nil) {
				t.Fatalf("generator %v, source %v", gen != nil, src != nil)
			}
			if c.owns != "" && Owner(c.owns) != c.name {
				t.Fatalf("%s owned by %q", c.owns, Owner(c.owns))
			}
			var k Knobs
			sc.Config(p, &k)
			if k == (Knobs{}) {
				t.Fatal("records no knobs")
			}
		})
	}
	if _, err := Lookup("black-friday"); err == nil {
		t.Fatal("unknown scenario found")
	}
	if Owner("Stock") != "" {
		t.Fatal("Stock belongs to every scenario")
	}
}

// TestMisplaced: a knob only an unchosen scenario reads is found, always the
// same one first; a chosen owner or no owner is fine.
func TestMisplaced(t *testing.T) {
	cases := []struct {
		name      string
		chosen    []string
		set       []string
		wantFlag  string
		wantOwner string
	}{
		{"none set", []string{"flash"}, nil, "", ""},
		{"owner chosen", []string{"flash", "sustained"}, []string{"Duration", "SKUs"}, "", ""},
		{"common flag", []string{"flash"}, []string{"Stock", "Buyers"}, "", ""},
		{"first in declared order", []string{"flash"}, []string{"Rate", "Mix", "SKUs", "Duration"}, "Duration", "sustained"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, o := Misplaced(c.chosen, func(f string) bool { return slices.Contains(c.set, f) })
			if f != c.wantFlag || o != c.wantOwner {
				t.Fatalf("Misplaced = %q, %q; want %q, %q", f, o, c.wantFlag, c.wantOwner)
			}
		})
	}
	if got := SplitList("flash, sustained"); !slices.Equal(got, []string{"flash", "sustained"}) {
		t.Fatalf("SplitList = %q", got)
	}
}
