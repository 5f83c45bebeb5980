package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/servers"
)

// leftoverBackends are the backends whose leftovers the tests below look
// for: local always, docker where an engine answers (required with
// STOCKBENCH_REQUIRE_DOCKER=1).
func leftoverBackends(t *testing.T) []string {
	b := []string{"local"}
	switch {
	case servers.DockerAvailable():
		b = append(b, "docker")
	case os.Getenv("STOCKBENCH_REQUIRE_DOCKER") == "1":
		t.Fatal("STOCKBENCH_REQUIRE_DOCKER=1 and no docker engine answers")
	}
	return b
}

// tempLeftovers lists the stockbench-* entries of a temp dir.
func tempLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "stockbench-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// containersOf lists the stockbench containers a process started, by the
// pid label each carries.
func containersOf(t *testing.T, pid int) []string {
	t.Helper()
	if !servers.DockerAvailable() {
		return nil
	}
	out, err := exec.Command("docker", "ps", "-a", "-q", "--filter", "label="+servers.LabelPID+"="+strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// hasAll reports whether every prefix names one of paths' base names.
func hasAll(paths, prefixes []string) bool {
	for _, p := range prefixes {
		found := false
		for _, d := range paths {
			found = found || strings.HasPrefix(filepath.Base(d), p)
		}
		if !found {
			return false
		}
	}
	return true
}

// shortRunArgs is a small flash sale that finishes in seconds.
func shortRunArgs(backend, out string) []string {
	return []string{"run", "--backend", backend, "--strategies", "rowlock", "--scenario", "flash", "--stock", "10",
		"--buyers", "12", "--pay-delay", "1ms-2ms", "--calibrate", "0", "--out", out}
}

// TestBrokenPipeRunCleansUp: a run whose stdout pipe is closed before it
// prints (stockbench run … | head -n 0, the worst case of | head -n 3) is
// not killed by SIGPIPE: it finishes with exit 0, writes its report, and
// leaves no container and no temporary directory behind.
func TestBrokenPipeRunCleansUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers; not in the -short tier")
	}
	exe := buildStockbench(t)
	for _, backend := range leftoverBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tmp, out := t.TempDir(), t.TempDir()
			c := exec.Command(exe, shortRunArgs(backend, out)...)
			c.Env = append(os.Environ(), "TMPDIR="+tmp)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			c.Stdout = w
			var stderr strings.Builder
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			// The reader goes before the run prints its first line.
			w.Close()
			r.Close()
			err = c.Wait()
			if err != nil {
				t.Fatalf("run with a closed stdout: %v (want exit 0)\n%s", err, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
				t.Errorf("no report: %v", err)
			}
			if l := tempLeftovers(t, tmp); len(l) > 0 {
				t.Errorf("temporary directories left: %v", l)
			}
			if cs := containersOf(t, c.Process.Pid); len(cs) > 0 {
				t.Errorf("containers left: %v", cs)
			}
		})
	}
}

// TestDownAfterKill: a run killed with SIGKILL in the middle of its load
// leaves its temporary directories (and, on docker, its containers);
// stockbench down removes every one of them and names each, while a
// directory of a live process in the same temp dir is kept.
func TestDownAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers; not in the -short tier")
	}
	exe := buildStockbench(t)
	for _, backend := range leftoverBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tmp := t.TempDir()
			env := append(os.Environ(), "TMPDIR="+tmp)
			args := []string{"run", "--backend", backend, "--strategies", "rowlock", "--scenario", "sustained", "--buyers", "4",
				"--duration", "10m", "--warmup", "0s", "--calibrate", "0", "--out", t.TempDir()}
			c := exec.Command(exe, args...)
			c.Env = env
			stderr, err := c.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { // a test that fails early leaves no run behind
				if c.ProcessState == nil {
					_ = c.Process.Kill()
					_ = c.Wait()
				}
			})
			// The load has begun once the run says so: its servers, ack
			// log and service directory all exist by then.
			sc := bufio.NewScanner(stderr)
			started := false
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "running rowlock on sustained") {
					started = true
					break
				}
			}
			if !started {
				_ = c.Process.Kill()
				_ = c.Wait()
				t.Fatal("the run ended before its load began")
			}
			// The trial makes its ack log and service directory right
			// after it says it runs: wait for them (the load is running
			// then, and the run holds them to its end).
			want := []string{"stockbench-acks-", "stockbench-local-", "stockbench-" + map[string]string{"local": "mysql-", "docker": "docker-"}[backend]}
			waitfor.Until(t, "the run's temporary directories "+strings.Join(want, ", "), func() bool { return hasAll(tempLeftovers(t, tmp), want) })
			if err := c.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			err = c.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("run: %v, want killed", err)
			}
			before := tempLeftovers(t, tmp)
			containers := containersOf(t, c.Process.Pid)
			for _, p := range want {
				if !strings.Contains(strings.Join(before, " "), p) {
					t.Fatalf("after kill -9, no %s* left (%v): the test no longer shows what down must remove", p, before)
				}
			}
			if backend == "docker" && len(containers) == 0 {
				t.Fatal("after kill -9, no container of the run left")
			}
			// A directory of this (live) test process must stay.
			t.Setenv("TMPDIR", tmp)
			live, err := servers.MkdirTemp("stockbench-acks-")
			if err != nil {
				t.Fatal(err)
			}
			d := exec.Command(exe, "down")
			d.Env = env
			got, err := d.CombinedOutput()
			if err != nil {
				t.Fatalf("down: %v\n%s", err, got)
			}
			for _, l := range before {
				if !strings.Contains(string(got), "removed "+l) {
					t.Errorf("down does not say it removed %s:\n%s", l, got)
				}
			}
			if after := tempLeftovers(t, tmp); len(after) != 1 || after[0] != live {
				t.Errorf("after down: %v, want only the live process's %s", after, live)
			}
			if cs := containersOf(t, c.Process.Pid); len(cs) > 0 {
				t.Errorf("after down, containers of the killed run: %v", cs)
			}
			t.Logf("%s: kill -9 left %d directories and %d containers; down removed them:\n%s", backend, len(before), len(containers), got)
		})
	}
}
