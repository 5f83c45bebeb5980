package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// yamlLine matches the line number yaml puts in its errors.
var yamlLine = regexp.MustCompile(`^yaml: line \d+: `)

// yamlError rewrites a YAML syntax error of b to name the line that breaks
// the file. yaml reports the line where the enclosing block began (one
// line early for a bad indentation); the first line from which every
// longer prefix of the file fails to parse is the one to fix.
func yamlError(b []byte, err error) error {
	if !yamlLine.MatchString(err.Error()) {
		return err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) > 5000 {
		return err
	}
	var m any
	bad := 0
	for k := len(lines); k >= 1; k-- {
		if yaml.Unmarshal(bytes.Join(lines[:k], nil), &m) == nil {
			break
		}
		bad = k
	}
	if bad == 0 {
		return err
	}
	return fmt.Errorf("line %d: %s", bad, yamlLine.ReplaceAllString(err.Error(), ""))
}

// closestFlag is the flag of fs nearest to name by edit distance, or ""
// when none is near enough to be what was meant.
func closestFlag(fs *flag.FlagSet, name string, skip ...string) string {
	best, bestD := "", 1<<30
	fs.VisitAll(func(f *flag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		if d := editDistance(strings.ToLower(name), f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	if bestD > max(2, len(name)/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// missingSKUs returns the SKUs of want that the inventory table of db does
// not hold, and how many SKUs it holds.
func missingSKUs(ctx context.Context, db *sql.DB, want []string) (missing []string, held int, err error) {
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM inventory").Scan(&held); err != nil {
		return nil, 0, fmt.Errorf("count SKUs: %w", err)
	}
	for _, sku := range want {
		var one int
		switch err := db.QueryRowContext(ctx, "SELECT 1 FROM inventory WHERE sku = ?", sku).Scan(&one); {
		case err == sql.ErrNoRows:
			missing = append(missing, sku)
		case err != nil:
			return nil, 0, fmt.Errorf("look up SKU %s: %w", sku, err)
		}
	}
	return missing, held, nil
}

// applyFile sets, from a YAML scenario file, every flag the command line
// did not set, through the flag's own parser (one parser for a setting,
// whichever way it was given), in the file's order. Every key that is no
// flag and every value its flag refuses is a problem naming its line; all
// are returned at once.
func applyFile(fs *flag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("scenario file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("scenario file %s: %w", path, yamlError(b, err))
	}
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("scenario file %s: line %d: want keys and values (key: value), one per line", path, m.Line)
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var errs problems
	bad := func(line int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("scenario file %s: line %d: %s", path, line, fmt.Sprintf(format, a...)))
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, vn := m.Content[i], m.Content[i+1]
		k := kn.Value
		if k == "faults" {
			// The file's list of faults is the repeatable --fault.
			k = "fault"
		}
		if fs.Lookup(k) == nil || k == "f" {
			if near := closestFlag(fs, k, "f"); near != "" {
				bad(kn.Line, "unknown key %q (did you mean %q?)", kn.Value, near)
			} else {
				bad(kn.Line, "unknown key %q", kn.Value)
			}
			continue
		}
		if set[k] {
			continue
		}
		v, err := nodeText(vn)
		if err == nil {
			err = fs.Set(k, v)
		}
		if err != nil {
			bad(vn.Line, "%s: %v", kn.Value, err)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// nodeText is a scenario file's value as its flag reads it on the command
// line: a scalar as written, a list joined by commas, a mapping as
// key=value pairs joined by commas, in the file's order.
func nodeText(n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for i, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return "", errors.New("a list of plain values is expected")
			}
			parts[i] = c.Value
		}
		return strings.Join(parts, ","), nil
	case yaml.MappingNode:
		var parts []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Kind != yaml.ScalarNode {
				return "", errors.New("a mapping of plain values is expected")
			}
			parts = append(parts, n.Content[i].Value+"="+n.Content[i+1].Value)
		}
		return strings.Join(parts, ","), nil
	}
	return "", errors.New("a value, a list or a mapping is expected")
}
