package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

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
