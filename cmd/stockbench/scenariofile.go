package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
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
