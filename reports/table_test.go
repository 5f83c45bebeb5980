package reports

import (
	"strings"
	"testing"
)

// TestTableLayouts: one table, laid out as markdown (the alignment line
// from Align, a missing letter left) and for a terminal (padded by runes,
// right-aligned figures, no trailing spaces).
func TestTableLayouts(t *testing.T) {
	cases := []struct {
		name           string
		t              table
		markdown, term string
	}{
		{"no rows", table{Head: []string{"a", "b"}, Align: "lr"}, "| a | b |\n|---|---:|\n", "a  b\n"},
		{"short align, empty cell", table{Head: []string{"strategy", "n", "note"}, Rows: [][]string{{"lua-tcc", "12", ""}, {"cas", "3", "x"}}, Align: "lr"},
			"| strategy | n | note |\n|---|---:|---|\n| lua-tcc | 12 |  |\n| cas | 3 | x |\n",
			"strategy   n  note\nlua-tcc   12\ncas        3  x\n"},
		{"wide runes", table{Head: []string{"Δ%", "→"}, Rows: [][]string{{"+1.0", "1 → 2"}}, Align: "rl"},
			"| Δ% | → |\n|---:|---|\n| +1.0 | 1 → 2 |\n", "  Δ%  →\n+1.0  1 → 2\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.t.markdown(); got != c.markdown {
				t.Errorf("markdown:\n%q\nwant\n%q", got, c.markdown)
			}
			var b strings.Builder
			c.t.terminal(&b)
			if got := b.String(); got != c.term {
				t.Errorf("terminal:\n%q\nwant\n%q", got, c.term)
			}
		})
	}
}
