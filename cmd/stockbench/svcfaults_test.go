package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/service"
	"github.com/stockbench/stockbench/strategies"
)

// procState is the state letter of /proc/PID/stat: 'T' when stopped.
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return b[i+2]
}

// TestServiceClockAndPause: two serve children of one strategy on real
// stores. Instance 0's clock is set an hour ahead (svc-clock): a
// reservation whose deadline is half an hour away is expired when
// confirmed through instance 0 and confirmed through instance 1, whose
// clock is true; a TTL instance 0 turns into a deadline lands an hour
// late in MySQL; the offset survives a SIGKILL and restart (svc-kill).
// svc-pause stops the process (state T in /proc) until Resume. Run for a
// strategy whose expiry check is in MySQL (rowlock) and one whose check
// reads the Redis reservation (lua-tcc).
func TestServiceClockAndPause(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cases := []struct {
		strategy string
	}{
		{"rowlock"}, // sqlstore.Orders.Finish compares expires_at with the service's clock
		{"lua-tcc"}, // redisstock.ConfirmTarget compares the Redis deadline with it
	}
	for _, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
				t.Fatal(err)
			}
			cfg := strategies.Defaults()
			cfg.SweepPeriod = time.Hour // no sweep: only Confirm decides expiry here
			spec := runner.ServiceSpec{Endpoints: env.Endpoints, Strategy: c.strategy, Config: cfg, Pool: 4,
				StateDirs: []string{t.TempDir(), t.TempDir()}}
			grp, err := startServeProcs(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			defer grp.Stop()
			urls := grp.URLs()
			var cl [2]*service.Client
			for i := range cl {
				if cl[i], err = service.NewClient(service.ClientOptions{Name: c.strategy}, urls[i]); err != nil {
					t.Fatal(err)
				}
				defer cl[i].Close()
				if err := cl[i].Setup(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := grp.SetClock(ctx, 0, time.Hour); err != nil {
				t.Fatal(err)
			}
			soon := time.Now().Add(30 * time.Minute)
			for _, id := range []string{"a", "b"} {
				if err := cl[1].Reserve(ctx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1, Deadline: soon}); err != nil {
					t.Fatalf("reserve %s: %v", id, err)
				}
			}
			// Instance 0 reads an hour ahead: "a" is past its deadline.
			if err := cl[0].Confirm(ctx, inventory.OrderRef{OrderID: "a", SKU: "S"}); !errors.Is(err, inventory.ErrAlreadyFinal) {
				t.Errorf("confirm through the skewed instance: %v, want already final (expired)", err)
			}
			if err := cl[1].Confirm(ctx, inventory.OrderRef{OrderID: "b", SKU: "S"}); err != nil {
				t.Errorf("confirm through the true clock: %v", err)
			}
			// The offset survives a kill and restart.
			if err := grp.Kill(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if err := grp.Restart(ctx, 0); err != nil {
				t.Fatal(err)
			}
			h, err := service.ReadHealth(ctx, nil, urls[0])
			if err != nil || h.ClockOffsetMillis != time.Hour.Milliseconds() {
				t.Errorf("restarted instance's health %+v, %v: want the hour's offset", h, err)
			}
			if c.strategy == "rowlock" {
				// A TTL the skewed service turns into a deadline: MySQL
				// keeps it an hour late.
				body := `{"order_id":"c","sku":"S","qty":1,"ttl_ms":60000}`
				if _, err := postJSON(ctx, urls[0]+service.PathReserve, body); err != nil {
					t.Fatal(err)
				}
				var exp time.Time
				if err := env.DB.QueryRowContext(ctx, "SELECT expires_at FROM orders WHERE order_id='c'").Scan(&exp); err != nil {
					t.Fatal(err)
				}
				if lo := time.Now().Add(50 * time.Minute); exp.Before(lo) {
					t.Errorf("expires_at %s of a 1-minute TTL through a clock an hour ahead: want after %s", exp, lo)
				}
			}
			// svc-pause: the process is stopped until resumed.
			pid := h.PID
			if err := grp.Pause(ctx, faults.AllInstances); err != nil {
				t.Fatal(err)
			}
			// SIGSTOP is delivered asynchronously: the process stops
			// soon after kill returns, and stays stopped.
			waitfor.Until(t, "the paused instance stopped (state T)", func() bool { return procState(t, pid) == 'T' })
			if err := grp.Resume(ctx, faults.AllInstances); err != nil {
				t.Fatal(err)
			}
			if err := service.WaitHealthy(ctx, nil, urls[0]); err != nil {
				t.Errorf("resumed instance: %v", err)
			}
			if err := grp.SetClock(ctx, 0, 0); err != nil {
				t.Errorf("clock back to true time: %v", err)
			}
		})
	}
}

// TestRunServiceClockPause: run --service process:2 with svc-clock and
// svc-pause in the plan: both applied and undone on the timeline, shown
// in summary.md's fault table, and the audit after settle is clean.
func TestRunServiceClockPause(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--service", "process:2", "--strategies", "lua-tcc",
		"--scenario", "sustained", "--duration", "2s", "--warmup", "300ms", "--buyers", "8", "--skus", "4", "--sweep-period", "100ms",
		"--fault", "svc-clock@200ms:1=+2s", "--fault", "svc-pause@1s+300ms:0",
		"--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if len(r.Faults) != 2 {
		t.Fatalf("fault timeline %+v", r.Faults)
	}
	for _, f := range r.Faults {
		if !f.Applied || f.Error != "" {
			t.Errorf("fault %+v: want applied without error", f)
		}
	}
	if r.Flows == 0 || r.Audit.Anomalies != 0 {
		t.Errorf("after settle: %d flows, %d anomalies: %v", r.Flows, r.Audit.Anomalies, r.Audit.Violations)
	}
	// The instances' CPU is measured apart from the generator's.
	if r.Cost == nil || r.Cost.ServiceCPUUSPerFlow == nil || *r.Cost.ServiceCPUUSPerFlow <= 0 {
		t.Errorf("cost %+v: want the service processes' CPU per flow", r.Cost)
	}
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"svc-clock@200ms:1=+2s", "svc-pause@1s+300ms:0"} {
		if !strings.Contains(string(md), spec) {
			t.Errorf("summary.md does not show %s", spec)
		}
	}
}

// postJSON posts body to url and returns the answer's body; a status
// other than 200 is an error.
func postJSON(ctx context.Context, url, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("POST %s: %s: %s", url, resp.Status, b)
	}
	return string(b), err
}

// TestServeContainers: on the docker backend the instances are containers
// (of the image docker generators use): docker lists them while they run,
// svc-pause freezes one (docker pause), svc-clock reaches it, svc-kill
// kills it and a new container serves at the same address, and Stop
// leaves no container behind.
func TestServeContainers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers and docker; not in the -short tier")
	}
	start, err := serviceContainers()
	if err != nil {
		t.Skipf("no docker generators here: %v", err)
	}
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
		t.Fatal(err)
	}
	spec := runner.ServiceSpec{Endpoints: env.Endpoints, Strategy: "rowlock", Config: strategies.Defaults(), Pool: 4,
		StateDirs: []string{t.TempDir(), t.TempDir()}}
	grp, err := start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = grp.Stop()
		}
	}()
	p := grp.(*serveProcs)
	inspect := func(name, format string) string {
		out, err := exec.Command("docker", "inspect", "-f", format, name).CombinedOutput()
		if err != nil {
			return "gone"
		}
		return strings.TrimSpace(string(out))
	}
	for i, name := range p.names {
		if st := inspect(name, "{{.State.Status}}"); st != "running" {
			t.Fatalf("instance %d: container %s is %s", i, name, st)
		}
	}
	steps := []struct {
		name string
		do   func() error
		want func() string // "" when the step holds
	}{
		{"pause instance 1", func() error { return grp.Pause(ctx, 1) }, func() string {
			if st := inspect(p.names[1], "{{.State.Paused}}"); st != "true" {
				return "paused: " + st
			}
			return ""
		}},
		{"resume instance 1", func() error { return grp.Resume(ctx, 1) }, func() string {
			if err := service.WaitHealthy(ctx, nil, grp.URLs()[1]); err != nil {
				return err.Error()
			}
			return ""
		}},
		{"clock of instance 0", func() error { return grp.SetClock(ctx, 0, 2*time.Second) }, func() string { return "" }},
		{"kill and restart instance 0", func() error {
			old := p.names[0]
			if err := grp.Kill(ctx, 0); err != nil {
				return err
			}
			if st := inspect(old, "{{.State.Status}}"); st == "running" {
				return fmt.Errorf("container %s still running after the kill", old)
			}
			return grp.Restart(ctx, 0)
		}, func() string {
			h, err := service.ReadHealth(ctx, nil, grp.URLs()[0])
			if err != nil || h.ClockOffsetMillis != 2000 {
				return fmt.Sprintf("restarted instance's health %+v, %v: want the 2s offset kept", h, err)
			}
			return ""
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if msg := s.want(); msg != "" {
			t.Errorf("%s: %s", s.name, msg)
		}
	}
	names := append([]string(nil), p.names...)
	if err := grp.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	stopped = true
	for _, name := range names {
		if st := inspect(name, "{{.State.Status}}"); st != "gone" {
			t.Errorf("container %s left behind: %s", name, st)
		}
	}
}
