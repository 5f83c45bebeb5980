package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPresetArticle runs --preset article through the real wiring (local
// servers), shortened by flags on the command line, which win over the
// preset: the results record the preset and the preset's own settings, and
// the report shows the article's figures beside the measured ones.
func TestPresetArticle(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--preset", "article", "--strategies", "naive,rowlock",
		"--scenario", "flash", "--pay-delay", "5ms-20ms", "--calibrate", "0s", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res := struct{ Config map[string]any }{readConfig(t, dir)}
	for k, v := range map[string]any{"preset": "article", "stock": 100.0, "buyers": 120.0, "pay_delay": "5ms-20ms", "rtt": "same-zone"} {
		if res.Config[k] != v {
			t.Errorf("config %s = %v, want %v", k, res.Config[k], v)
		}
	}
	if s, _ := res.Config["strategies"].([]any); len(s) != 2 {
		t.Errorf("config strategies = %v: the command line should win over the preset", res.Config["strategies"])
	}
	summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Beside the article", "| naive | flash | – |", "| 13.5 |", "MySQL 8.0", "Redis 6.2", "this run modelled same-zone: RTT 450µs±80µs", "| rowlock | sustained | 620 | not run |"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.md lacks %q", want)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte(`id="article"`)) {
		t.Error("index.html has no article section")
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "article-oversell.png")); err != nil {
		t.Errorf("no article chart: %v", err)
	}
}

// TestPresetUnknown: a preset that does not exist is a usage error naming
// the ones that do.
func TestPresetUnknown(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"run", "--preset", "artcle", "--out", t.TempDir()}, &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "want one of article") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
