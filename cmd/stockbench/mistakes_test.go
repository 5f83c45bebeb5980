package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScenarioFileMistakes: a scenario file's mistakes get one line, exit
// 2, that names the line to fix or the key that was meant.
func TestScenarioFileMistakes(t *testing.T) {
	cases := []struct {
		name, file string
		want       string // in the one line
	}{
		// A key one letter off: the flag it was meant to be.
		{"misspelt key", "scenario: sustained\nbuyer: 10\n", `unknown key "buyer" (did you mean "buyers"?)`},
		{"misspelt hyphenated key", "pay_delay: 1ms\n", `unknown key "pay_delay" (did you mean "pay-delay"?)`},
		// Nothing near: no guess.
		{"foreign key", "scenario: sustained\nzzzzzzzz: 1\n", `unknown key "zzzzzzzz"` + "\n"},
		// yaml names line 3, where the mapping began.
		{"bad indentation in a map", "scenario: sustained\nmix:\n  confirm: 0.8\n cancel: 0.2\n", "line 4: did not find expected key"},
		// yaml names line 2.
		{"tab indentation", "scenario: sustained\nbuyers: 10\n\tduration: 2s\n", "line 3: found a tab character"},
		{"bad indentation in a list", "faults:\n  - redis-pause@1s+1s\n - app-crash@2s\n", "line 3: did not find expected key"},
		// A flow list over two lines, then the bad line.
		{"after a flow list", "faults: [redis-pause@1s+1s,\n  app-crash@2s]\nbuyers: 10\n x: 1\n", "line 4: mapping values are not allowed"},
		{"bad first line", "scenario: [sustained\nbuyers: 10\n", "line 1:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(path, []byte(c.file), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"run", "-f", path}, &out, &errb)
			if code != exitUsage || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line with %q", code, errb.String(), c.want)
			}
		})
	}
}

// TestScenarioFileEveryProblem: a scenario file's problems are reported
// all at once, each on its own line naming the file's line, in its order.
func TestScenarioFileEveryProblem(t *testing.T) {
	file := "scenario: sustained\nbuyer: 10\nduration: 10\nmix:\n  confirm: 0.9\n  cancel: 0.1\nzzzzzzzz: 1\n"
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "-f", path}, &out, &errb)
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	want := []string{`line 2: unknown key "buyer" (did you mean "buyers"?)`, "line 3: duration:", `line 7: unknown key "zzzzzzzz"`}
	if code != exitUsage || len(lines) != len(want) {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %d lines", code, errb.String(), len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d of stderr %q, want it to name %q", i+1, lines[i], w)
		}
	}
}

// TestAuditLedgerUnknownSKU: audit --ledger naming a SKU the database
// does not hold says so in one line (exit 2) instead of grading every SKU
// as broken; a ledger of SKUs it holds audits as before.
func TestAuditLedgerUnknownSKU(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env := externalServers(t)
	ctx := context.Background()
	var out, errb bytes.Buffer
	// A sustained catalog of 3 SKUs of 100 units.
	if code := Main(ctx, []string{"prepare", "--backend", "external", "--scenario", "sustained", "--skus", "3", "--strategies", "rowlock"}, &out, &errb); code != exitOK {
		t.Fatalf("prepare: exit %d: %s", code, errb.String())
	}
	// rowlock keeps nothing in Redis: the audit reads MySQL only.
	t.Setenv("STOCKBENCH_REDIS_URL", "")
	var sku string
	if err := env.DB.QueryRowContext(ctx, "SELECT sku FROM inventory ORDER BY sku LIMIT 1").Scan(&sku); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, ledger string
		code         int
		want         string
	}{
		{"the help's example on a sustained database", "FLASH-1=100", exitUsage, "--ledger: SKU FLASH-1 is not in this database's inventory (it holds 3 SKUs)"},
		{"one known, one not", sku + "=100,NOPE=5", exitUsage, "SKU NOPE is not"},
		{"a SKU it holds", sku + "=100", exitOK, "oversold_units"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out.Reset()
			errb.Reset()
			code := Main(ctx, []string{"audit", "--ledger", c.ledger}, &out, &errb)
			got := out.String() + errb.String()
			if code != c.code || !strings.Contains(got, c.want) {
				t.Fatalf("exit %d, want %d; output:\n%s\nwant %q", code, c.code, got, c.want)
			}
			if c.code == exitUsage && strings.Count(errb.String(), "\n") != 1 {
				t.Fatalf("want one line, got %q", errb.String())
			}
		})
	}
}
