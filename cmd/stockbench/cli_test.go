package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBadInput: every bad input is one line on stderr and exit code 2.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string // substring of the error line
	}{
		{"no command", nil, "usage"},
		{"unknown command", []string{"fly"}, "unknown command"},
		{"unknown flag", []string{"run", "--nope"}, "flag provided but not defined"},
		{"unknown strategy", []string{"run", "--strategies", "rowlock,magic"}, `unknown strategy "magic"`},
		{"unknown scenario", []string{"run", "--scenario", "sale"}, "--scenario"},
		{"scenario twice", []string{"run", "--scenario", "flash,flash"}, "named twice"},
		{"bad pay delay", []string{"run", "--pay-delay", "500ms-200ms"}, "--pay-delay"},
		{"zero stock", []string{"run", "--stock", "0"}, "--stock"},
		{"abandon above 1", []string{"run", "--abandon", "1.5"}, "--abandon"},
		{"bad cas retry", []string{"run", "--cas-retry", "never"}, "--cas-retry"},
		{"stray argument", []string{"run", "extra"}, "unexpected argument"},
		{"unknown backend", []string{"run", "--backend", "cloud"}, "unknown backend"},
		{"half external", []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x"}, "needs --mysql-dsn and --redis-addr"},
		{"unreachable external", []string{"run", "--backend", "external", "--mysql-dsn", "root:pw@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1"}, "does not answer"},
		{"sustained flag on flash", []string{"run", "--duration", "5s"}, "sustained scenario only"},
		{"bad skew", []string{"run", "--scenario", "sustained", "--skew", "zipf:0.5"}, "--skew"},
		{"bad mix", []string{"run", "--scenario", "sustained", "--mix", "confirm=0.5"}, "--mix"},
		{"zero repeat", []string{"run", "--repeat", "0"}, "--repeat"},
		{"missing scenario file", []string{"run", "-f", "/nonexistent.yaml"}, "scenario file"},
		{"calibrate bad concurrency", []string{"calibrate", "--concurrency", "0"}, "--concurrency"},
		{"report without dir", []string{"report"}, "usage"},
		{"report of missing dir", []string{"report", "/nonexistent"}, "read results"},
		{"compare one file", []string{"compare", "a.json"}, "usage"},
		{"compare bad threshold", []string{"compare", "--max-tps-drop", "lots", "a", "b"}, "percentage"},
		{"sweep without param", []string{"sweep"}, "--param"},
		{"sweep of a non-flag", []string{"sweep", "--param", "speed=1,2"}, "not a sweepable"},
		{"sweep of a bad value", []string{"sweep", "--param", "buyers=10,x"}, "buyers=x"},
		{"bad weights", []string{"run", "--weights", "speed=1"}, "--weights"},
		{"audit bad ledger", []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--ledger", "S=ten"}, "--ledger"},
		{"audit redis-only without redis", []string{"audit", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-reservations"}, "--redis-addr"},
		{"audit unreachable", []string{"audit", "--mysql-dsn", "root:pw@tcp(127.0.0.1:1)/x"}, "does not answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), c.args, &out, &errb)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			msg := errb.String()
			if !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q does not say %q", msg, c.want)
			}
			if c.args != nil && strings.Count(strings.TrimSpace(msg), "\n") != 0 {
				t.Fatalf("error is not one line: %q", msg)
			}
			if strings.Contains(msg, ":pw@") {
				t.Fatalf("password printed: %q", msg)
			}
		})
	}
}

// TestRunEndToEnd runs the real wiring (local servers) on a small flash
// sale, then re-renders the report from results.json.
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--strategies", "naive,lua-tcc", "--stock", "50", "--buyers", "80",
		"--pay-delay", "5ms-20ms", "--seed", "3", "--calibrate", "200ms", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Config      map[string]any     `json:"config"`
		Calibration map[string]float64 `json:"calibration"`
		Env         struct {
			MySQLVersion string `json:"mysql_version"`
			RedisVersion string `json:"redis_version"`
		} `json:"env"`
		Runs []struct {
			Strategy  string                        `json:"strategy"`
			Scenario  string                        `json:"scenario"`
			TPS       float64                       `json:"tps"`
			LatencyMS map[string]map[string]float64 `json:"latency_ms"`
			Counts    map[string]map[string]int64   `json:"counts"`
			Audit     map[string]any                `json:"audit"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Calibration["redis_evalsha_ops"] <= 0 || res.Calibration["mysql_hot_update_ops"] <= 0 || res.Calibration["mysql_hot_txn_ops"] <= 0 {
		t.Fatalf("calibration missing: %v", res.Calibration)
	}
	if len(res.Runs) != 2 || res.Env.MySQLVersion == "" || res.Env.RedisVersion == "" || res.Config["seed"] == nil {
		t.Fatalf("results incomplete: %s", b)
	}
	for _, r := range res.Runs {
		for _, k := range []string{"confirmed_units", "oversold_units", "oversell_rate", "leaked_units", "invariant_violations", "lost_acks"} {
			if _, ok := r.Audit[k]; !ok {
				t.Fatalf("%s: audit.%s missing", r.Strategy, k)
			}
		}
		for _, op := range []string{"reserve", "confirm", "cancel", "flow"} {
			if _, ok := r.LatencyMS[op]["p999"]; !ok {
				t.Fatalf("%s: latency_ms.%s.p999 missing", r.Strategy, op)
			}
		}
		if r.TPS <= 0 || r.Scenario != "flash" {
			t.Fatalf("%s: tps %v scenario %q", r.Strategy, r.TPS, r.Scenario)
		}
	}
	if !strings.Contains(out.String(), "lua-tcc") {
		t.Fatalf("table not printed: %s", out.String())
	}
	for _, f := range []string{"index.html", "summary.csv", "series.csv", "charts/tps-flash.png", "charts/tps-flash.svg",
		"charts/p99-flash.png", "charts/oversell-flash.png", "charts/spectrum-flash.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run did not write %s", f)
		}
	}
	summary := filepath.Join(dir, "summary.md")
	first, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(summary)
	os.RemoveAll(filepath.Join(dir, "charts"))
	if code := Main(context.Background(), []string{"report", dir}, &out, &errb); code != exitOK {
		t.Fatalf("report exit %d: %s", code, errb.String())
	}
	again, err := os.ReadFile(summary)
	if err != nil || !bytes.Equal(first, again) {
		t.Fatalf("report did not restore summary.md identically (err %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "tps-flash.png")); err != nil {
		t.Fatalf("report did not restore the charts: %v", err)
	}
}

// TestInterrupt: Ctrl-C in the middle still writes results and leaves no
// server running.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(4*time.Second, cancel)
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"run", "--backend", "local", "--strategies", "rowlock,conditional", "--stock", "10", "--buyers", "20",
		"--pay-delay", "1s-2s", "--quiet", "--out", dir}, &out, &errb)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatalf("no results after interrupt: %v", err)
	}
	if !strings.Contains(string(b), `"interrupted": true`) {
		t.Fatalf("results do not say interrupted")
	}
	if kids := children(); len(kids) > 0 {
		t.Fatalf("processes left running: %v", kids)
	}
}

// children lists processes whose parent is this test process.
func children() []string {
	var out []string
	me := strconv.Itoa(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}

// TestScenarioFile: a YAML file sets flags, the command line wins, and an
// unknown key is named.
func TestScenarioFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("scenario: sustained\nbuyerz: 10\n"), 0o644)
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"run", "-f", bad}, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), `unknown key "buyerz"`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("scenario: sustained\nstrategies: [conditional]\nbuyers: 4\nduration: 600ms\nwarmup: 0s\nmix: {confirm: 1}\nskus: 2\ncalibrate: 0s\nseed: 9\n"), 0o644)
	errb.Reset()
	code := Main(context.Background(), []string{"run", "--backend", "local", "-f", good, "--seed", "11", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if sc, _ := res.Config["scenarios"].([]any); len(sc) != 1 || sc[0] != "sustained" {
		t.Errorf("config scenarios = %v", res.Config["scenarios"])
	}
	want := map[string]any{"buyers": 4.0, "skus": 2.0, "seed": 11.0, "duration": "600ms", "mix": "confirm=1,cancel=0,abandon=0"}
	for k, v := range want {
		if res.Config[k] != v {
			t.Errorf("config %s = %v, want %v", k, res.Config[k], v)
		}
	}
}

// TestSweepAndCompare runs a two-value sweep through the real wiring, then
// uses compare as CI would: the file against itself passes, against a copy
// with oversell injected it fails.
func TestSweepAndCompare(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"sweep", "--backend", "local", "--param", "buyers=10,30", "--strategies", "conditional,cas",
		"--stock", "20", "--pay-delay", "5ms", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("sweep exit %d: %s", code, errb.String())
	}
	for _, f := range []string{"results.json", "index.html", "summary.csv", "charts/sweep-tps.png", "charts/sweep-tps.svg", "charts/sweep-cas-retries.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("sweep did not write %s", f)
		}
	}
	path := filepath.Join(dir, "results.json")
	b, _ := os.ReadFile(path)
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	runs, _ := res["runs"].([]any)
	if sw, _ := res["sweep"].(map[string]any); sw["param"] != "buyers" || len(runs) != 4 {
		t.Fatalf("sweep block %v, %d runs", res["sweep"], len(runs))
	}
	if code := Main(context.Background(), []string{"compare", path, path}, &out, &errb); code != exitOK {
		t.Fatalf("compare with itself: exit %d: %s", code, errb.String())
	}
	runs[0].(map[string]any)["audit"].(map[string]any)["oversold_units"] = 5
	bad, _ := json.Marshal(res)
	badPath := filepath.Join(dir, "bad.json")
	os.WriteFile(badPath, bad, 0o644)
	errb.Reset()
	if code := Main(context.Background(), []string{"compare", "--max-tps-drop", "100%", path, badPath}, &out, &errb); code != exitFailed {
		t.Fatalf("compare with injected oversell: exit %d, want %d", code, exitFailed)
	}
	if !strings.Contains(errb.String(), "regressed") {
		t.Fatalf("stderr %q", errb.String())
	}
}
