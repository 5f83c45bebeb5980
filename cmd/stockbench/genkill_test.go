package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	_ "github.com/glebarez/go-sqlite" // reads outbox-local's table

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies/outboxlocal"
)

// genKillFlags are the runs of these tests: outbox-local on the sustained
// scenario with its relay held off (--outbox-period 1h), so a generator
// killed mid-load leaves every event it appended in its local table.
var genKillFlags = []string{"--strategies", "outbox-local", "--scenario", "sustained", "--skus", "2", "--buyers", "8",
	"--warmup", "0s", "--outbox-period", "1h", "--calibrate", "0", "--quiet"}

// acksLogged reports whether the ack log at path holds at least one ack.
func acksLogged(path string) bool { return ackBytes(path) > 0 }

// ackBytes is the size of the ack log at path (0: none).
func ackBytes(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// midLoad is how much of an ack log shows a generator well into its load:
// a hundred or so acks (a few tens of bytes each).
const midLoad = 4 << 10

// TestProcsGeneratorKilled: of run --procs 2 on servers of the harness's
// own provider, generator 1 is killed with SIGKILL once its ack log shows
// it well into its load. The other finishes; the parent drains the dead
// one's local table through the registry, grades its logged acks with the
// other's, writes the report and exits 3: the run is unproven (a
// generator lost), its audit clean, the dead one's table relayed, nothing
// left running and nothing left in the temporary directory.
func TestProcsGeneratorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	dir := t.TempDir()
	tmp, err := os.MkdirTemp("", "genkill-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	t.Setenv("TMPDIR", tmp) // the run's and its generators' temporary files
	var mu sync.Mutex
	var pids []int
	onSpawn = func(pid int) { mu.Lock(); pids = append(pids, pid); mu.Unlock() }
	defer func() { onSpawn = nil }()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(context.Background(), append([]string{"run", "--backend", "local", "--procs", "2", "--duration", "4s", "--out", dir},
			genKillFlags...), &out, &errb)
	}()
	state := filepath.Join(dir, "shards", "outbox-local-sustained-1", "shard-1", "state")
	waitfor.Until(t, "generator 1's acks in its state directory", func() bool {
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before generator 1 logged its acks: %s", code, errb.String())
		default:
		}
		return ackBytes(filepath.Join(state, runner.AckFile)) >= midLoad
	})
	victim := 0
	mu.Lock()
	for _, pid := range pids {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); err == nil && bytes.Contains(b, []byte("--shard\x001/2\x00")) {
			victim = pid
		}
	}
	all := append([]int(nil), pids...)
	mu.Unlock()
	if victim == 0 {
		t.Fatalf("no process of generator 1 among %v", all)
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill generator 1 (pid %d): %v", victim, err)
	}
	code := <-done
	if code != exitIncomplete {
		t.Fatalf("exit %d, want %d (unproven): %s", code, exitIncomplete, errb.String())
	}
	if !strings.Contains(errb.String(), "generator 1/2 died before its report") {
		t.Errorf("stderr does not name the dead generator: %s", errb.String())
	}
	res, err := results.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("report: %v (%d runs)", err, len(res.Runs))
	}
	run := res.Runs[0]
	if got := analysis.SafetyOf(res.Runs); got.Kind != analysis.Unproven || got.Phase != results.IncompleteGeneratorLost {
		t.Errorf("verdict %+v, want unproven (%s)", got, results.IncompleteGeneratorLost)
	}
	if len(run.Lost) != 1 {
		t.Fatalf("lost generators %+v, want generator 1", run.Lost)
	}
	l := run.Lost[0]
	if l.Index != 1 || l.Of != 2 || !strings.Contains(l.Exit, "killed") || l.Acks == 0 || l.Drained == 0 || l.DrainError != "" || l.AckError != "" {
		t.Errorf("lost generator %+v: want 1/2, killed, its acks read and its table drained", l)
	}
	if run.Audit.Anomalies != 0 || run.Audit.LostAcks != 0 || len(run.Audit.Violations) > 0 {
		t.Errorf("audit after the drain: %d anomalies, %d lost acks: %v", run.Audit.Anomalies, run.Audit.LostAcks, run.Audit.Violations)
	}
	if run.Flows == 0 || len(run.Shards) != 1 || run.Shards[0].Index != 0 {
		t.Errorf("the survivor's figures: %d flows, shards %+v", run.Flows, run.Shards)
	}
	// Drained: no table left to relay; the ack log stays, the record of
	// what the dead generator's clients were told.
	if _, err := os.Stat(filepath.Join(state, runner.StateLocal)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead generator's local state is still there after its drain: %v", err)
	}
	if !acksLogged(filepath.Join(state, runner.AckFile)) {
		t.Errorf("the dead generator's ack log is gone")
	}
	for _, pid := range all {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("generator pid %d still there: %v", pid, err)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in the temporary directory: %v", names)
	}
	t.Logf("dead generator: %d acks, %d events drained; survivor: %d flows; audit: %d confirmed units",
		l.Acks, l.Drained, run.Flows, run.Audit.ConfirmedUnits)
}

// TestShardStateDirRerun: a generator started by hand (run --shard 1/2
// --no-reset --state-dir D) on prepared external servers is killed with
// SIGKILL mid-load, its relay held off: its table holds its events and
// MySQL none of its acknowledged orders. A generator started again on D
// relays that backlog at its setup: the table is empty, MySQL holds every
// order the dead one acknowledged, the new results carry the dead one's
// acks too, and the stores audit clean against them.
func TestShardStateDirRerun(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, exe := generatorServers(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	flags := append([]string{"--backend", "external"}, genKillFlags...)
	var out, errb bytes.Buffer
	if code := Main(context.Background(), append([]string{"prepare"}, flags...), &out, &errb); code != exitOK {
		t.Fatalf("prepare: exit %d: %s", code, errb.String())
	}
	shard := append(append([]string{"run"}, flags...), "--shard", "1/2", "--no-reset", "--state-dir", state)
	first := exec.Command(exe, append(shard, "--duration", "10m", "--out", filepath.Join(dir, "first"))...)
	first.Env = append(os.Environ(), shardChildEnv+"=1")
	first.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var ferr bytes.Buffer
	first.Stderr = &ferr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Process.Kill(); _ = first.Wait() }()
	table := filepath.Join(state, runner.StateLocal, outboxlocal.FileName)
	waitfor.Until(t, "the first generator's acks in its state directory", func() bool {
		return ackBytes(filepath.Join(state, runner.AckFile)) >= midLoad
	})
	// A second generator on a directory in use is refused.
	errb.Reset()
	if code := Main(context.Background(), append(shard, "--duration", "1s", "--out", filepath.Join(dir, "refused")), &out, &errb); code != exitUsage ||
		!strings.Contains(errb.String(), "in use by another generator") {
		t.Errorf("a second generator on the state dir: exit %d: %s", code, errb.String())
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := first.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first generator: %v, want killed by SIGKILL: %s", err, ferr.String())
	}
	acks, torn, err := runner.ReadAckFile(filepath.Join(state, runner.AckFile))
	if err != nil || len(acks) == 0 {
		t.Fatalf("the dead generator's acks: %d, %v", len(acks), err)
	}
	held := map[string]bool{} // orders acknowledged reserved or confirmed
	for _, a := range acks {
		if a.State == inventory.StateReserved || a.State == inventory.StateConfirmed {
			held[a.OrderID] = true
		}
	}
	backlog := countEvents(t, table)
	before := inMySQL(t, env, held)
	if backlog == 0 || before == len(held) {
		t.Fatalf("the kill left %d events in the table and %d of %d acknowledged orders already in MySQL: nothing to relay", backlog, before, len(held))
	}
	out.Reset()
	errb.Reset()
	second := filepath.Join(dir, "second")
	if code := Main(context.Background(), append(shard, "--duration", "1s", "--out", second), &out, &errb); code != exitOK {
		t.Fatalf("generator started again: exit %d: %s", code, errb.String())
	}
	if n := countEvents(t, table); n != 0 {
		t.Errorf("%d events left in the table after the second generator", n)
	}
	if after := inMySQL(t, env, held); after != len(held) {
		t.Errorf("%d of the %d orders the dead generator acknowledged are in MySQL after the second relayed its table", after, len(held))
	}
	res, err := results.ReadJSON(filepath.Join(second, "results.json"))
	if err != nil || len(res.Runs) != 1 {
		t.Fatalf("second generator's results: %v", err)
	}
	if got := len(res.Runs[0].ShardAcks); got < len(acks) {
		t.Errorf("the second generator's results carry %d acks, fewer than the %d its predecessor logged", got, len(acks))
	}
	if acksLogged(filepath.Join(state, runner.AckFile)) {
		t.Errorf("the ack log stays after the results that carry its acks were written")
	}
	ackFile := filepath.Join(dir, "acks.json")
	b, err := json.Marshal(res.Runs[0].ShardAcks)
	if err == nil {
		err = os.WriteFile(ackFile, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), []string{"audit", "--acks", ackFile, "--redis-reservations", "--json"}, &out, &errb); code != exitOK {
		t.Fatalf("audit: exit %d: %s%s", code, errb.String(), out.String())
	}
	var a audit.Audit
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	if a.Anomalies != 0 || a.LostAcks != 0 {
		t.Errorf("audit: %d anomalies, %d lost acks: %v", a.Anomalies, a.LostAcks, a.Violations)
	}
	t.Logf("killed generator: %d acks (%d torn bytes), %d events in its table, %d of %d held orders in MySQL before the re-run",
		len(acks), torn, backlog, before, len(held))
}

// countEvents counts the events in outbox-local's table at path.
func countEvents(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM events").Scan(&n); err != nil {
		t.Fatalf("count events in %s: %v", path, err)
	}
	return n
}

// inMySQL counts the orders of ids that MySQL's orders table holds.
func inMySQL(t *testing.T, env servertest.Env, ids map[string]bool) int {
	t.Helper()
	n := 0
	for id := range ids {
		var one int
		err := env.DB.QueryRow("SELECT 1 FROM orders WHERE order_id=?", id).Scan(&one)
		switch {
		case err == nil:
			n++
		case !errors.Is(err, sql.ErrNoRows):
			t.Fatal(err)
		}
	}
	return n
}
