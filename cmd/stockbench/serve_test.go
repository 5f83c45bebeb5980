package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/service"
)

// TestServeBadInput: serve refuses bad input with one line on stderr and
// exit 2, before it starts any server (none of these cases has any).
func TestServeBadInput(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	held := t.TempDir()
	unlock, err := lockStateDir(held, "serve.lock", "serve instance")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cases := []struct {
		name string
		args []string
		want string // in the error line
	}{
		{"no strategy", []string{}, "--strategy is required"},
		{"unknown strategy", []string{"--strategy", "nope"}, `unknown strategy "nope"`},
		// every interface, or another host's address: not without --allow-remote
		{"all interfaces", []string{"--strategy", "rowlock", "--listen", ":8080"}, "not a loopback address"},
		{"remote address", []string{"--strategy", "rowlock", "--listen", "10.1.2.3:8080"}, "not a loopback address"},
		{"no port", []string{"--strategy", "rowlock", "--listen", "127.0.0.1"}, "want host:port"},
		{"bad load", []string{"--strategy", "rowlock", "--load", "S=x"}, `"S=x" is not SKU=N`},
		{"bad pool", []string{"--strategy", "rowlock", "--pool", "0"}, "--pool must be positive"},
		// the port is someone else's: refused at once, nothing started
		{"busy port", []string{"--strategy", "rowlock", "--listen", busy.Addr().String(), "--backend", "external"}, "address already in use"},
		// another instance holds the state directory
		{"state dir in use", []string{"--strategy", "outbox-local", "--state-dir", held}, "in use by another serve instance"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(context.Background(), append([]string{"serve"}, tc.args...), &out, &errb)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			if lines := strings.Count(errb.String(), "\n"); lines != 1 || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q: want one line containing %q", errb.String(), tc.want)
			}
		})
	}
}

// serveChild is a `stockbench serve` child process (this test binary
// standing in for stockbench, see TestMain) on the test's servers.
type serveChild struct {
	cmd *exec.Cmd
	url string
	out *bufio.Reader
}

var readyLine = regexp.MustCompile(`^serving \S+ on (http://\S+) `)

// startServe starts serve with args and waits for its ready line.
func startServe(t *testing.T, ep servers.Endpoints, args ...string) *serveChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--backend", "external", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), shardChildEnv+"=1", "STOCKBENCH_MYSQL_DSN="+ep.MySQLDSN, "STOCKBENCH_MYSQL_DSNS=",
		"STOCKBENCH_REDIS_ADDR=", "STOCKBENCH_REDIS_URL="+redisURLOf(ep))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &serveChild{cmd: cmd, out: bufio.NewReader(stdout)}
	line, err := c.out.ReadString('\n')
	m := readyLine.FindStringSubmatch(line)
	if err != nil || m == nil {
		_ = cmd.Wait()
		t.Fatalf("serve %v: no ready line (%q, %v); stderr %q", args, line, err, errb.String())
	}
	c.url = m[1]
	return c
}

// TestServeKillRestart: an outbox-local instance acknowledges reserves,
// confirms and a cancel that sit in its local message table only (its
// relay is held off), is killed with SIGKILL, and a new instance on the
// same --state-dir relays that backlog: after a settle through the API the
// audit against every ack is clean. The second instance then drains on
// SIGTERM and exits 0. It is the same with another instance (issue 42,
// finding 7) on the same stores serving before, during and after the
// kill: the restarted one relays the old backlog beside it.
func TestServeKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	cases := []struct {
		name string
		peer bool // another instance keeps serving throughout
	}{
		{"alone", false},
		{"beside a running instance", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serveKillRestart(t, env, tc.peer)
		})
	}
}

// serveKillRestart is one case of TestServeKillRestart.
func serveKillRestart(t *testing.T, env servertest.Env, peer bool) {
	ctx := context.Background()
	dir := t.TempDir()
	held := []string{"--outbox-period", "1h", "--reconcile-period", "1h", "--sweep-period", "1h"}
	first := startServe(t, env.Endpoints, append([]string{"--strategy", "outbox-local", "--load", "S=10", "--state-dir", dir}, held...)...)
	c, err := service.NewClient(service.ClientOptions{Name: "outbox-local"}, first.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var acks []inventory.Ack
	do := func(c *service.Client, op, id string) {
		t.Helper()
		ref := inventory.OrderRef{OrderID: id, SKU: "S"}
		var err error
		var state inventory.OrderState
		switch op {
		case "reserve":
			err, state = c.Reserve(ctx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Hour)}), inventory.StateReserved
		case "confirm":
			err, state = c.Confirm(ctx, ref), inventory.StateConfirmed
		case "cancel":
			err, state = c.Cancel(ctx, ref), inventory.StateCancelled
		}
		if err != nil {
			t.Fatalf("%s %s: %v", op, id, err)
		}
		acks = append(acks, inventory.Ack{OrderID: id, SKU: "S", State: state})
	}
	var other *service.Client
	wantConfirmed := int64(4)
	if peer {
		p := startServe(t, env.Endpoints, "--strategy", "outbox-local", "--state-dir", t.TempDir(), "--outbox-period", "100ms")
		if other, err = service.NewClient(service.ClientOptions{Name: "outbox-local"}, p.url); err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		do(other, "reserve", "p1")
		do(other, "confirm", "p1")
		wantConfirmed++
	}
	for _, id := range []string{"o1", "o2", "o3", "o4", "o5"} {
		do(c, "reserve", id)
	}
	for _, id := range []string{"o1", "o2", "o3"} {
		do(c, "confirm", id)
	}
	do(c, "cancel", "o4")
	// The premise: MySQL holds none of it yet; the backlog is in dir.
	var n int
	if err := env.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE order_id LIKE 'o%'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("MySQL already holds %d orders: the relay was not held off, the test tests nothing", n)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.cmd.Wait()
	if peer {
		// The other instance sells on while the first is down.
		do(other, "reserve", "p2")
		do(other, "cancel", "p2")
	}

	second := startServe(t, env.Endpoints, "--strategy", "outbox-local", "--state-dir", dir, "--outbox-period", "100ms")
	c2, err := service.NewClient(service.ClientOptions{Name: "outbox-local"}, second.url)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	// An order reserved before the crash is confirmed after it.
	do(c2, "confirm", "o5")
	if peer {
		do(other, "reserve", "p3")
		do(c2, "confirm", "p3") // balanced to the restarted instance
		wantConfirmed++
		if err := other.Settle(ctx); err != nil {
			t.Fatalf("settle the other instance: %v", err)
		}
	}
	if err := c2.Settle(ctx); err != nil {
		t.Fatalf("settle: %v", err)
	}
	a := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true, Ledger: map[string]int64{"S": 10}}
	res, err := a.Audit(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	if res.Anomalies != 0 || res.ConfirmedUnits != wantConfirmed {
		t.Errorf("after the restart and settle: %d anomalies %v, %d confirmed units (want 0 and %d)", res.Anomalies, res.Violations, res.ConfirmedUnits, wantConfirmed)
	}
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(second.out)
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v, want exit 0", err)
	}
	if !strings.Contains(string(rest), "drained outbox-local") {
		t.Errorf("serve's last words %q: want the drained line", rest)
	}
}

// TestRunServiceProcess: run --service process:2 drives each strategy
// through two serve children on the run's stores: both instances answer
// reserves (round robin), and the run is audited clean like an in-process
// one, its acks kept in the generator.
func TestRunServiceProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	var mu sync.Mutex
	served := map[string][]int64{} // strategy → ok answers per instance
	onServeStop = func(i int, h service.Health) {
		mu.Lock()
		defer mu.Unlock()
		for len(served[h.Strategy]) <= i {
			served[h.Strategy] = append(served[h.Strategy], 0)
		}
		served[h.Strategy][i] = h.Served[inventory.OK]
	}
	t.Cleanup(func() { onServeStop = nil })
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--service", "process:2", "--strategies", "lua-tcc,outbox-local",
		"--scenario", "sustained", "--duration", "2s", "--warmup", "300ms", "--buyers", "16", "--skus", "4", "--sweep-period", "100ms",
		"--outbox-period", "100ms", "--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
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
	for _, r := range res.Runs {
		if r.Flows == 0 || r.Audit.Anomalies != 0 || r.AuditEndOfLoad == nil || r.AuditEndOfLoad.OversoldUnits != 0 {
			t.Errorf("%s: %d flows, %d anomalies after settle: %v", r.Strategy, r.Flows, r.Audit.Anomalies, r.Audit.Violations)
		}
		if n := served[r.Strategy]; len(n) != 2 || n[0] == 0 || n[1] == 0 {
			t.Errorf("%s: ok answers per instance %v: want both instances used", r.Strategy, n)
		}
	}
}

// TestRunServiceKill: outbox-local as two service processes whose relay
// is held off (every event stays in the instances' local tables until
// settle), instance 0 SIGKILLed mid-run and restarted on its state
// directory: its backlog — acknowledged reserves and confirms no other
// process knows of — must be relayed, so the audit after settle finds no
// lost ack and no drift; the timeline shows the kill and the restart.
func TestRunServiceKill(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"run", "--backend", "local", "--service", "process:2", "--strategies", "outbox-local",
		"--scenario", "sustained", "--duration", "2s", "--warmup", "300ms", "--buyers", "16", "--skus", "4",
		"--outbox-period", "1h", "--fault", "svc-kill@1s+200ms:0",
		"--calibrate", "0", "--quiet", "--out", dir}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if len(r.Faults) != 1 || !r.Faults[0].Applied || r.Faults[0].Error != "" || r.Faults[0].EndSec <= r.Faults[0].StartSec {
		t.Fatalf("fault timeline %+v: want the kill applied and the instance back after it", r.Faults)
	}
	if r.Flows == 0 || r.Audit.Anomalies != 0 || r.Audit.LostAcks != 0 || r.Audit.DriftUnits != 0 {
		t.Errorf("after settle: %d flows, %d anomalies (%d lost acks, %d drift units): %v",
			r.Flows, r.Audit.Anomalies, r.Audit.LostAcks, r.Audit.DriftUnits, r.Audit.Violations)
	}
	// The relays are held off, so what MySQL holds at the end of load is
	// what the restarted instance relayed from its state directory when
	// it started (its Setup drains the local table first).
	if r.AuditEndOfLoad == nil || r.AuditEndOfLoad.ConfirmedUnits == 0 {
		t.Errorf("end of load: MySQL holds no confirmed unit: the restarted instance relayed no backlog")
	}
}

// TestRunServiceFlags: run refuses --service settings it cannot honour,
// naming the flag, with exit 2 and nothing started.
func TestRunServiceFlags(t *testing.T) {
	base := []string{"run", "--backend", "external", "--scenario", "sustained", "--duration", "5s", "--out", t.TempDir()}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no instances", []string{"--service", "process:0"}, "want process:N with N ≥ 1"},
		{"unknown mode", []string{"--service", "threads"}, "want in-process, process or process:N"},
		// the instance a kill names must exist
		{"kill past the instances", []string{"--service", "process:2", "--fault", "svc-kill@1s:2"}, "no instance 2 of --service process:2"},
		{"kill without instances", []string{"--fault", "svc-kill@1s"}, "needs --service process"},
		// network faults act on the generator's pools, not the instances'
		{"network fault", []string{"--service", "process:2", "--fault", "latency:redis=5ms@1s+1s"}, "not with --service process yet"},
		{"app-crash", []string{"--service", "process", "--fault", "app-crash@1s"}, "not with --service process yet"},
		{"several generators", []string{"--service", "process:2", "--procs", "2"}, "not with several generators"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := Main(context.Background(), append(append([]string(nil), base...), tc.args...), &out, &errb); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q: want %q", errb.String(), tc.want)
			}
		})
	}
}
