package reports

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table is one table of a report, built once from the results and laid
// out by each format: markdown (summary.md), the terminal, and index.html
// (which takes Head and Rows). It is the one table aligner of reports/.
type table struct {
	Head []string
	Rows [][]string
	// Align has one letter per column: 'r' aligns it right (figures),
	// anything else, or no letter, left.
	Align string
	// Flagged marks cells (row, column) whose figure is a verdict against
	// the run — UNSAFE, unproven, an anomaly count above zero, a sale that
	// did not sell out — so a format that can (index.html) shows them in
	// red. Markdown and the terminal lay out the text alone.
	Flagged map[[2]int]bool
}

// flag marks the cell of row i, column j (see Flagged).
func (t *table) flag(i, j int) {
	if t.Flagged == nil {
		t.Flagged = map[[2]int]bool{}
	}
	t.Flagged[[2]int{i, j}] = true
}

// htmlCell is one cell as index.html lays it out.
type htmlCell struct {
	Text          string
	Right, Bad    bool
	Strategy      string // first column of a table of strategies: the swatch's
	Median, Range string // a folded "median (min–max)" cell, split
}

// Class is the cell's class attribute: "l" for a left-aligned cell,
// "bad" for a flagged one, both, or "".
func (c htmlCell) Class() string {
	switch {
	case !c.Right && c.Bad:
		return "l bad"
	case !c.Right:
		return "l"
	case c.Bad:
		return "bad"
	}
	return ""
}

// htmlTable is a table as index.html lays it out.
type htmlTable struct {
	Head []string
	Rows [][]htmlCell
}

// html is t's layout for index.html; swatch puts each strategy's chart
// colour beside the name in the first column.
func (t table) html(swatch bool) htmlTable {
	out := htmlTable{Head: t.Head, Rows: make([][]htmlCell, len(t.Rows))}
	for i, row := range t.Rows {
		cells := make([]htmlCell, len(row))
		for j, c := range row {
			cell := htmlCell{Text: c, Right: t.right(j), Bad: t.Flagged[[2]int{i, j}]}
			if j == 0 && swatch && c != "" {
				cell.Strategy = c
			}
			if k := strings.Index(c, " ("); k > 0 && strings.HasSuffix(c, ")") && cell.Right {
				cell.Median, cell.Range = c[:k], c[k+2:len(c)-1]
			}
			cells[j] = cell
		}
		out.Rows[i] = cells
	}
	return out
}

// right reports whether column i is right-aligned.
func (t table) right(i int) bool { return i < len(t.Align) && t.Align[i] == 'r' }

// markdown lays t out as a pipe table: the head, the alignment line
// (---: for a right-aligned column), one line per row.
func (t table) markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Head, " | ") + " |\n|")
	for i := range t.Head {
		if t.right(i) {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

// terminal writes t aligned for a terminal: columns padded to their
// widest cell, two spaces apart, trailing spaces cut.
func (t table) terminal(w io.Writer) {
	all := append([][]string{t.Head}, t.Rows...)
	widths := make([]int, len(t.Head))
	for _, row := range all {
		for i, c := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range all {
		var line strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if t.right(i) {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
			if i < len(row)-1 {
				line.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
}
