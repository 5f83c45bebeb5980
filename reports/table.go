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
