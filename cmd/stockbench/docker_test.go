package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// dockerOrSkip skips without a Docker engine, unless STOCKBENCH_REQUIRE_DOCKER=1.
func dockerOrSkip(t *testing.T) {
	t.Helper()
	if _, err := servers.New(servers.Options{Backend: "docker"}); err != nil {
		if os.Getenv("STOCKBENCH_REQUIRE_DOCKER") == "1" {
			t.Fatalf("docker required: %v", err)
		}
		t.Skipf("no docker: %v", err)
	}
}

// containersOfThisProcess counts the containers this test process started.
func containersOfThisProcess(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+servers.LabelPID+"="+strconv.Itoa(os.Getpid())).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return len(strings.Fields(string(out)))
}

// dockerImages picks the official images when present, else the offline ones.
func dockerImages() []string {
	if exec.Command("docker", "image", "inspect", servers.DefaultMySQLImage, servers.DefaultRedisImage).Run() == nil {
		return nil
	}
	return []string{"--mysql-image", servers.OfflineMySQLImage, "--redis-image", servers.OfflineRedisImage}
}

// TestDockerRun is the acceptance run on containers: rowlock and
// lua-tcc on the flash sale; env names the server versions; nothing is left.
func TestDockerRun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dockerOrSkip(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := append([]string{"run", "--backend", "docker", "--strategies", "rowlock,lua-tcc", "--scenario", "flash",
		"--stock", "30", "--buyers", "40", "--pay-delay", "5ms-20ms", "--calibrate", "200ms", "--quiet", "--out", dir}, dockerImages()...)
	if code := Main(context.Background(), args, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Env struct {
			Backend      string `json:"backend"`
			MySQLVersion string `json:"mysql_version"`
			RedisVersion string `json:"redis_version"`
		} `json:"env"`
		Runs []struct {
			Audit struct {
				OversoldUnits int64 `json:"oversold_units"`
			} `json:"audit"`
		}
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Env.Backend != "docker" || res.Env.MySQLVersion == "" || res.Env.RedisVersion == "" || len(res.Runs) != 2 {
		t.Fatalf("results: %s", b[:min(len(b), 600)])
	}
	if strings.Contains(string(b), "MYSQL_ROOT_PASSWORD") || strings.Contains(out.String()+errb.String(), "requirepass") {
		t.Fatal("a password leaked")
	}
	if n := containersOfThisProcess(t); n != 0 {
		t.Fatalf("%d containers left after the run", n)
	}
}

// TestDockerInterrupt: Ctrl-C in the middle of a docker run still writes
// results and removes the containers.
func TestDockerInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dockerOrSkip(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancel when the second strategy starts: the runner logs "running …"
	// to stderr as each begins (an event, not a guess at timing), so the
	// first run is finished and must be in the results. Cancelling in the
	// middle of a flow is covered in the runner's tests.
	var out bytes.Buffer
	errb := &cancelOn{what: "running conditional", cancel: cancel}
	args := append([]string{"run", "--backend", "docker", "--strategies", "rowlock,conditional", "--stock", "10", "--buyers", "20",
		"--pay-delay", "200ms-300ms", "--calibrate", "0", "--out", dir}, dockerImages()...)
	code := Main(ctx, args, &out, errb)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || !bytes.Contains(b, []byte(`"interrupted": true`)) || !bytes.Contains(b, []byte(`"strategy": "rowlock"`)) {
		t.Fatalf("no interrupted results with the finished rowlock run (%v)", err)
	}
	if n := containersOfThisProcess(t); n != 0 {
		t.Fatalf("%d containers left after Ctrl-C", n)
	}
}

// TestProcsDocker: run --procs 2 --generators docker plays each shard in a
// container (host networking, this test binary mounted) against local
// servers: the merged counts are the shards' sums, the audit after the
// merge is clean, each generator is named by its container, and no
// container is left.
func TestProcsDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dockerOrSkip(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--procs", "2", "--generators", "docker",
		"--strategies", "lua-tcc,rowlock", "--scenario", "flash", "--stock", "30", "--buyers", "24", "--pay-delay", "2ms-10ms",
		"--seed", "3", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	for _, run := range res.Runs {
		t.Run(run.Strategy, func(t *testing.T) {
			var flows, buyers int64
			counts := map[string]int64{}
			for i := range 2 {
				d := filepath.Join(dir, "shards", run.Strategy+"-flash-1", fmt.Sprintf("shard-%d", i))
				r, err := results.ReadJSON(filepath.Join(d, "results.json"))
				if err != nil {
					t.Fatal(err)
				}
				s := r.Runs[0]
				if s.Shard == nil || s.Shard.Index != i || !strings.HasPrefix(s.Shard.Container, "stockbench-gen-") {
					t.Fatalf("shard %d: %+v", i, s.Shard)
				}
				flows += s.Flows
				for op, m := range s.Counts {
					for cls, n := range m {
						counts[op+"/"+cls] += n
					}
				}
			}
			merged := map[string]int64{}
			for op, m := range run.Counts {
				for cls, n := range m {
					merged[op+"/"+cls] += n
				}
			}
			if run.Flows != flows || fmt.Sprint(merged) != fmt.Sprint(counts) {
				t.Errorf("merged flows %d counts %v; the shards' sums %d %v", run.Flows, merged, flows, counts)
			}
			for _, n := range run.Journeys {
				buyers += n
			}
			if buyers != 24 {
				t.Errorf("the generators played %d buyers of 24: %v", buyers, run.Journeys)
			}
			if len(run.Shards) != 2 || run.Shards[0].Container == run.Shards[1].Container {
				t.Errorf("merged run's generators: %+v", run.Shards)
			}
			a := run.Audit
			if n := a.Count(); n != 0 || a.ConfirmedUnits != flows {
				t.Errorf("audit after the merge: %d anomalies, %d confirmed units (flows %d): %+v", n, a.ConfirmedUnits, flows, a)
			}
		})
	}
	if n := containersOfThisProcess(t); n != 0 {
		t.Fatalf("%d containers left after the run", n)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, "summary.md")), "(container stockbench-gen-") {
		t.Error("summary.md does not name the generators' containers")
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProcsDockerInterrupt: Ctrl-C of a run whose generators are
// containers reaches them; the run ends as interrupted (exit 130, results
// written) and no container or process is left.
func TestProcsDockerInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dockerOrSkip(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	spawned := 0
	onSpawn = func(int) {
		mu.Lock()
		defer mu.Unlock()
		if spawned++; spawned == 2 {
			cancel()
		}
	}
	defer func() { onSpawn = nil }()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"run", "--backend", "local", "--procs", "2", "--generators", "docker", "--strategies", "rowlock,conditional",
		"--stock", "10", "--buyers", "20", "--pay-delay", "1s-2s", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil || !res.Interrupted {
		t.Fatalf("results after the interrupt: %v, interrupted %v", err, res != nil && res.Interrupted)
	}
	if n := containersOfThisProcess(t); n != 0 {
		t.Fatalf("%d containers left after Ctrl-C", n)
	}
	if kids := children(); len(kids) > 0 {
		t.Fatalf("processes left running: %v", kids)
	}
}

// readResultsJSON decodes DIR/results.json into v, failing the test if it
// cannot.
func readResultsJSON(t *testing.T, dir string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
