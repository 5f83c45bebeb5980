package faults

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
)

// fakeFaulter records calls and keeps each target's state.
type fakeFaulter struct {
	mu    sync.Mutex
	calls []string
	state map[string]string // running, paused, down
	fail  string            // a call "Op target" that fails
}

func (f *fakeFaulter) do(op, target, want, to string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op+" "+target)
	if f.fail == op+" "+target {
		return errors.New("injected failure")
	}
	if f.state == nil {
		f.state = map[string]string{}
	}
	if st := f.state[target]; want != "" && st != want && !(want == "running" && st == "") {
		return fmt.Errorf("%s %s while %s", op, target, st)
	}
	f.state[target] = to
	return nil
}
func (f *fakeFaulter) Pause(_ context.Context, t string) error {
	return f.do("Pause", t, "running", "paused")
}
func (f *fakeFaulter) Resume(_ context.Context, t string) error {
	return f.do("Resume", t, "paused", "running")
}
func (f *fakeFaulter) Kill(_ context.Context, t string) error { return f.do("Kill", t, "", "down") }
func (f *fakeFaulter) Restart(_ context.Context, t string) error {
	return f.do("Restart", t, "", "running")
}
func (f *fakeFaulter) PID(string) int { return 0 }

func (f *fakeFaulter) snapshot() ([]string, map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := map[string]string{}
	for k, v := range f.state {
		st[k] = v
	}
	return append([]string(nil), f.calls...), st
}

func mustPlan(t *testing.T, specs ...string) Plan {
	t.Helper()
	p, err := ParsePlan(specs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInjectorTimeline runs a short plan to its end: every fault applied
// and undone in order, app-crash through the hook, the timeline's offsets
// no earlier than planned.
func TestInjectorTimeline(t *testing.T) {
	ff := &fakeFaulter{}
	var crashes []Fault
	var mu sync.Mutex
	in := &Injector{
		Plan:    mustPlan(t, "redis-pause@10ms+50ms", "mysql-restart@0s", "redis-restart@100ms+20ms", "app-crash@30ms"),
		Faulter: ff,
		OnAppCrash: func(_ context.Context, f Fault) error {
			mu.Lock()
			crashes = append(crashes, f)
			mu.Unlock()
			return nil
		},
	}
	start := time.Now()
	events, err := in.Run(context.Background(), start)
	if err != nil {
		t.Fatal(err)
	}
	calls, state := ff.snapshot()
	if st := state["redis"] + "," + state["mysql"]; st != "running,running" {
		t.Fatalf("state after the plan: %s (calls %v)", st, calls)
	}
	var redisCalls []string
	for _, c := range calls {
		if strings.HasSuffix(c, "redis") {
			redisCalls = append(redisCalls, c)
		}
	}
	if got := strings.Join(redisCalls, ","); got != "Pause redis,Resume redis,Kill redis,Restart redis" {
		t.Fatalf("redis calls: %s", got)
	}
	if len(crashes) != 1 || crashes[0].Kind != AppCrash {
		t.Fatalf("app-crash hook calls: %v", crashes)
	}
	if len(events) != 4 {
		t.Fatalf("%d events", len(events))
	}
	for i, e := range events {
		if e.Fault != in.Plan[i] || e.Err != "" || e.Applied.IsZero() || e.Undone.Before(e.Applied) {
			t.Errorf("event %d: %+v", i, e)
		}
		if e.Start < e.Fault.At || e.End < e.Fault.End() {
			t.Errorf("event %s: applied %s–%s, before its plan", e.Fault, e.Start, e.End)
		}
	}
	if w := Windows(events); len(w) != 4 || w[0][0] > w[1][0] {
		t.Fatalf("windows %v", w)
	}
}

// TestInjectorCancelUndoes: a cancelled run resumes what it paused and
// restarts what it killed, and says the faults were cut short.
func TestInjectorCancelUndoes(t *testing.T) {
	ff := &fakeFaulter{}
	applied := make(chan Event, 10)
	in := &Injector{
		Plan:    mustPlan(t, "redis-pause@0s+1h", "mysql-restart@0s+1h", "app-crash@1h"),
		Faulter: ff, OnAppCrash: func(context.Context, Fault) error { t.Error("app-crash ran"); return nil },
		OnEvent: func(e Event) { applied <- e },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Event)
	go func() {
		ev, _ := in.Run(ctx, time.Now())
		done <- ev
	}()
	<-applied
	<-applied
	cancel()
	events := <-done
	_, state := ff.snapshot()
	if state["redis"] != "running" || state["mysql"] != "running" {
		t.Fatalf("after cancel: %v", state)
	}
	for _, e := range events[:2] {
		if !e.Cancelled || e.Undone.IsZero() || !strings.Contains(e.Err, "cut short") {
			t.Errorf("event %s: %+v", e.Fault, e)
		}
	}
	if e := events[2]; !e.Applied.IsZero() || !strings.Contains(e.Err, "not applied") {
		t.Errorf("app-crash event after cancel: %+v", e)
	}
}

// TestInjectorErrors: what a plan needs is checked before anything runs,
// and a fault that fails is in the timeline and the error.
func TestInjectorErrors(t *testing.T) {
	for _, c := range []struct {
		in   Injector
		want string
	}{
		{Injector{Plan: mustPlan(t, "redis-pause@0s+1s")}, "no process faults"},
		{Injector{Plan: mustPlan(t, "latency:redis=5ms@0s+1s"), Faulter: &fakeFaulter{}}, "no proxy"},
		{Injector{Plan: mustPlan(t, "app-crash@0s"), Faulter: &fakeFaulter{}}, "no app-crash hook"},
	} {
		if _, err := c.in.Run(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.in.Plan, err, c.want)
		}
	}
	ff := &fakeFaulter{fail: "Kill mysql"}
	in := &Injector{Plan: mustPlan(t, "mysql-restart@0s+10ms"), Faulter: ff}
	events, err := in.Run(context.Background(), time.Now())
	if err == nil || !strings.Contains(events[0].Err, "injected failure") {
		t.Fatalf("failed kill: %v, %+v", err, events)
	}
	if _, st := ff.snapshot(); st["mysql"] != "running" {
		t.Fatalf("a failed kill left mysql %s", st["mysql"])
	}
}

// TestInjectorOnServers runs a plan on the real servers and proxy: while
// Redis is paused and MySQL delayed, a Redis round trip times out and a
// MySQL one takes the latency; cancelling undoes both.
func TestInjectorOnServers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	e := needEnv(t)
	if e.Faulter == nil {
		t.Skip("backend without process faults")
	}
	ep, p := proxied(t)
	c, db := redisClient(t, ep), mysqlDB(t, ep)
	waitfor.Until(t, "both answer", func() bool { return pingRedis(c) == nil && pingMySQL(db) == nil })
	applied := make(chan Event, 4)
	in := &Injector{Plan: mustPlan(t, "redis-pause@0s+1h", "latency:mysql=200ms@0s+1h"), Faulter: e.Faulter, Proxy: p,
		OnEvent: func(e Event) { applied <- e }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Event)
	go func() {
		ev, _ := in.Run(ctx, time.Now())
		done <- ev
	}()
	<-applied
	<-applied
	errRedis := pingRedis(c)
	t0 := time.Now()
	var one int
	errMySQL := db.QueryRow("SELECT 1").Scan(&one)
	slow := time.Since(t0)
	cancel()
	events := <-done
	if !timedOut(errRedis) {
		t.Errorf("redis round trip while paused: %v, want a timeout", errRedis)
	}
	if errMySQL != nil || slow < 200*time.Millisecond {
		t.Errorf("mysql round trip under 200ms latency: %s, %v", slow, errMySQL)
	}
	for _, ev := range events {
		if !ev.Cancelled || ev.Undone.IsZero() {
			t.Errorf("event %s not undone: %+v", ev.Fault, ev)
		}
	}
	if _, ok := p.Active(MySQL); ok {
		t.Error("latency left on after cancel")
	}
	waitfor.Until(t, "redis answers after cancel", func() bool { return pingRedis(c) == nil })
	waitfor.Until(t, "mysql fast after cancel", func() bool {
		t0 := time.Now()
		return pingMySQL(db) == nil && time.Since(t0) < 200*time.Millisecond
	})
}

// TestInjectorRestartKeepsData: redis-restart through the injector on a
// Redis keeping an everysec AOF: the server really restarted (new pid) and
// kept its keys.
func TestInjectorRestartKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	e := needEnv(t)
	if e.Faulter == nil {
		t.Skip("backend without process faults")
	}
	ctx := context.Background()
	if err := e.Redis.Set(ctx, "inject:probe", "kept", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	pid := e.Faulter.PID("redis")
	in := &Injector{Plan: mustPlan(t, "redis-restart@0s"), Faulter: e.Faulter}
	events, err := in.Run(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redis restart (everysec): %s", events[0].Undone.Sub(events[0].Applied))
	if pid != 0 && e.Faulter.PID("redis") == pid {
		t.Fatal("redis pid unchanged: not restarted")
	}
	var v string
	waitfor.Until(t, "redis answers after restart", func() bool {
		v, err = e.Redis.Get(ctx, "inject:probe").Result()
		return err == nil
	})
	if v != "kept" {
		t.Fatalf("key after restart: %q", v)
	}
}

// TestInjectorLocalFail: a local-fail fault is the hook's, switched on at
// its start and off at its end; without a hook the plan is refused.
func TestInjectorLocalFail(t *testing.T) {
	var calls []bool
	in := &Injector{Plan: mustPlan(t, "local-fail@0s+10ms"),
		OnLocalFail: func(_ context.Context, on bool) error { calls = append(calls, on); return nil }}
	events, err := in.Run(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || !calls[0] || calls[1] {
		t.Fatalf("hook calls %v, want [true false]", calls)
	}
	if len(events) != 1 || events[0].Err != "" || events[0].Undone.Before(events[0].Applied) {
		t.Fatalf("events %+v", events)
	}
	if err := (&Injector{Plan: mustPlan(t, "local-fail@0s+10ms")}).Check(); err == nil {
		t.Fatal("a local-fail plan without a hook was accepted")
	}
}

// fakeServices records the service faults' calls, instance by instance.
type fakeServices struct {
	mu    sync.Mutex
	calls []string
	clock map[int]time.Duration
}

func (s *fakeServices) rec(call string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
	return nil
}
func (s *fakeServices) Kill(_ context.Context, i int) error { return s.rec(fmt.Sprint("kill ", i)) }
func (s *fakeServices) Restart(_ context.Context, i int) error {
	return s.rec(fmt.Sprint("restart ", i))
}
func (s *fakeServices) Pause(_ context.Context, i int) error  { return s.rec(fmt.Sprint("pause ", i)) }
func (s *fakeServices) Resume(_ context.Context, i int) error { return s.rec(fmt.Sprint("resume ", i)) }
func (s *fakeServices) SetClock(_ context.Context, i int, d time.Duration) error {
	s.mu.Lock()
	if s.clock == nil {
		s.clock = map[int]time.Duration{}
	}
	s.clock[i] = d
	s.mu.Unlock()
	return s.rec(fmt.Sprint("clock ", i, " ", d))
}

// TestInjectorServices: each svc- fault reaches the service group as the
// calls it stands for, in order per instance; a windowed clock offset is
// put back, a lasting one stays, and a cancelled run resumes every frozen
// instance.
func TestInjectorServices(t *testing.T) {
	cases := []struct {
		name   string
		plan   []string
		cancel bool
		want   string // the calls, in order
		clock  map[int]time.Duration
	}{
		{"pause of one instance", []string{"svc-pause@0s+10ms:1"}, false, "pause 1,resume 1", nil},
		{"pause of every instance", []string{"svc-pause@0s+10ms"}, false, "pause -1,resume -1", nil},
		{"clock for a window", []string{"svc-clock@0s+10ms:0=+2s"}, false, "clock 0 2s,clock 0 0s", map[int]time.Duration{0: 0}},
		{"lasting clock, then a kill", []string{"svc-clock@0s:1=-1s", "svc-kill@20ms:1"}, false, "clock 1 -1s,kill 1,restart 1", map[int]time.Duration{1: -time.Second}},
		{"cancelled pause resumes", []string{"svc-pause@0s+1h:0"}, true, "pause 0,resume 0", nil},
	}
	for _, c := range cases {
		sv := &fakeServices{}
		applied := make(chan Event, 10)
		in := &Injector{Plan: mustPlan(t, c.plan...), Services: sv, OnEvent: func(e Event) { applied <- e }}
		ctx, cancel := context.WithCancel(context.Background())
		if c.cancel {
			go func() { <-applied; cancel() }()
		}
		events, err := in.Run(ctx, time.Now())
		cancel()
		if c.cancel != (err != nil) {
			t.Errorf("%s: error %v", c.name, err)
		}
		got := sv.calls
		if len(c.plan) > 1 {
			// Faults run concurrently: only each one's own calls are in
			// order; the cases of several faults compare sorted calls.
			sort.Strings(got)
			w := strings.Split(c.want, ",")
			sort.Strings(w)
			c.want = strings.Join(w, ",")
		}
		if got := strings.Join(got, ","); got != c.want {
			t.Errorf("%s: calls %s, want %s", c.name, got, c.want)
		}
		for i, d := range c.clock {
			if sv.clock[i] != d {
				t.Errorf("%s: instance %d clock %s, want %s", c.name, i, sv.clock[i], d)
			}
		}
		for _, e := range events {
			if e.Applied.IsZero() {
				t.Errorf("%s: %s never applied: %s", c.name, e.Fault, e.Err)
			}
		}
	}
	// Without service processes, an svc- fault is refused before anything.
	in := &Injector{Plan: mustPlan(t, "svc-clock@0s:0=+2s")}
	if err := in.Check(); err == nil || !strings.Contains(err.Error(), "no service processes") {
		t.Errorf("Check without services: %v", err)
	}
}
