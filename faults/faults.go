// Package faults describes, injects and undoes the faults of a run: process
// faults on the servers stockbench started (pause, kill -9 and restart),
// network faults through an in-process proxy between the harness and each
// store (latency, reset, partition), and the service's own crash
// (app-crash, which the runner carries out through a hook).
//
// A fault is written as one spec:
//
//	redis-pause@5s+3s           pause Redis at 5 s for 3 s (SIGSTOP/SIGCONT, docker pause)
//	mysql-restart@8s            kill -9 MySQL at 8 s, start it again at once on the same data
//	redis-restart@5s+2s         kill -9 at 5 s, down for 2 s, then started again
//	redis-lose@5s+2s            Redis killed at 7 s and back at once holding what it held at 5 s:
//	                            every write of those 2 s lost, acknowledged or not (as AOF everysec
//	                            or a failover to a lagging replica loses them)
//	latency:redis=20ms±10ms@4s+6s  20 ms ± 10 ms added to every Redis reply (also 20ms+-10ms)
//	reset:mysql@6s              cut every open MySQL connection at 6 s
//	reset:mysql@6s+2s           ... and reset every connection that sends during 2 s more
//	partition:redis@5s+2s       Redis unreachable for 2 s: bytes dropped both ways
//	app-crash@6s                the strategy instance is dropped and a new one started
//	svc-kill@4s:0               service instance 0 (run --service process:N) killed with SIGKILL
//	                            at 4 s and started again at once on its state directory
//	svc-kill@4s+1s:1            ... instance 1, down for 1 s first (no index: instance 0)
//	svc-pause@4s+2s:1           service instance 1 frozen (SIGSTOP) at 4 s, resumed (SIGCONT)
//	                            at 6 s; no index: every instance at once
//	svc-clock@4s:1=+2s          from 4 s on, instance 1's clock reads 2 s ahead (=-2s: behind),
//	                            for every wall-clock reading of the service (expiry deadlines,
//	                            TTLs, timestamps, sweeper and reconciler cut-offs); a restart
//	                            keeps it. svc-clock@4s+3s:1=+2s: back to the true time at 7 s
//	local-fail@5s+2s            the service's local message table (outbox-local) takes no
//	                            write for 2 s: each write blocks until the fault ends or
//	                            its operation's deadline passes, then fails
//
// Times are offsets from the start of load.
package faults

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind is what a fault does.
type Kind string

// Fault kinds.
const (
	Pause     Kind = "pause"     // process frozen for Duration
	Restart   Kind = "restart"   // process killed (-9), down for Duration (0: restarted at once)
	Latency   Kind = "latency"   // network: replies delayed for Duration
	Reset     Kind = "reset"     // network: open connections cut; with Duration, new ones reset too
	Partition Kind = "partition" // network: nothing gets through for Duration
	AppCrash  Kind = "app-crash" // the service: strategy instance dropped mid-flow
	// SvcKill: a service process (run --service process:N) killed with
	// SIGKILL, down for Duration, then started again on its state
	// directory.
	SvcKill Kind = "kill"
	// SvcPause: service processes frozen (SIGSTOP) for Duration, then
	// resumed (SIGCONT); Instance AllInstances freezes every one.
	SvcPause Kind = "svc-pause"
	// SvcClock: a service process's wall clock offset by Offset from At
	// (to End, when Duration is set; else to the end of the run).
	SvcClock Kind = "svc-clock"
	// LocalFail: the service's local table (outbox-local's message
	// database) takes no write for Duration; the runner carries it out
	// through a hook.
	LocalFail Kind = "local-fail"
	// Lose: the server's data at At is checkpointed; at End it is killed
	// and started again holding that checkpoint, every write of the
	// Duration between lost (Redis only).
	Lose Kind = "lose"
)

// Target is what a fault hits.
type Target string

// Targets.
const (
	Redis Target = "redis"
	MySQL Target = "mysql"
	App   Target = "app"
	// Svc is a service process of run --service process:N; the fault's
	// Instance says which.
	Svc Target = "svc"
	// Local is the service's own disk (its local table).
	Local Target = "local"
)

// Fault is one parsed fault spec.
type Fault struct {
	Kind   Kind
	Target Target
	// At is when the fault starts, from the start of load.
	At time.Duration
	// Duration is how long it lasts; 0 for instant faults (restart at once,
	// a reset of the open connections, app-crash).
	Duration time.Duration
	// Latency and Jitter are the added delay of a latency fault: each reply
	// is held Latency ± Jitter (uniform).
	Latency, Jitter time.Duration
	// Instance is the service instance a svc- fault hits (from 0), or
	// AllInstances (svc-pause without an index).
	Instance int
	// Offset is an svc-clock fault's clock offset (positive: ahead).
	Offset time.Duration
}

// AllInstances is the Instance of an svc- fault that hits every instance.
const AllInstances = -1

// End is when the fault is over (At for an instant fault).
func (f Fault) End() time.Duration { return f.At + f.Duration }

// Network reports whether the fault goes through the proxy.
func (f Fault) Network() bool {
	return f.Kind == Latency || f.Kind == Reset || f.Kind == Partition
}

// Process reports whether the fault acts on a server process.
func (f Fault) Process() bool { return f.Kind == Pause || f.Kind == Restart || f.Kind == Lose }

// Service reports whether the fault acts on the service processes of run
// --service process:N.
func (f Fault) Service() bool { return f.Target == Svc }

// String is the fault's canonical spec (± written as ±).
func (f Fault) String() string {
	var b strings.Builder
	switch f.Kind {
	case Pause, Restart, Lose, SvcKill:
		b.WriteString(string(f.Target) + "-" + string(f.Kind))
	case AppCrash, LocalFail, SvcPause, SvcClock:
		b.WriteString(string(f.Kind))
	case Latency:
		fmt.Fprintf(&b, "latency:%s=%s", f.Target, f.Latency)
		if f.Jitter > 0 {
			fmt.Fprintf(&b, "±%s", f.Jitter)
		}
	default:
		b.WriteString(string(f.Kind) + ":" + string(f.Target))
	}
	b.WriteString("@" + f.At.String())
	if f.Duration > 0 {
		b.WriteString("+" + f.Duration.String())
	}
	if f.Target == Svc && f.Instance != AllInstances {
		fmt.Fprintf(&b, ":%d", f.Instance)
	}
	if f.Kind == SvcClock {
		b.WriteString("=")
		if f.Offset > 0 {
			b.WriteString("+")
		}
		b.WriteString(f.Offset.String())
	}
	return b.String()
}

// Parse reads one fault spec. Errors are one line that quotes the spec.
func Parse(spec string) (Fault, error) {
	f, err := parse(strings.TrimSpace(spec))
	if err != nil {
		return Fault{}, fmt.Errorf("fault %q: %v", spec, err)
	}
	return f, nil
}

const forms = "want e.g. redis-pause@5s+3s, mysql-restart@8s, redis-lose@5s+2s, latency:redis=20ms±10ms@4s+6s, reset:mysql@6s, partition:redis@5s+2s, app-crash@6s, svc-kill@4s:0, svc-pause@4s+2s:0, svc-clock@4s:0=+2s, local-fail@5s+2s"

func parse(s string) (Fault, error) {
	var f Fault
	what, when, ok := strings.Cut(s, "@")
	if !ok || what == "" {
		return f, fmt.Errorf("no @time (%s)", forms)
	}
	switch what {
	case string(Svc) + "-" + string(SvcKill), string(SvcPause), string(SvcClock):
		return parseSvc(what, when)
	}
	if err := parseWhen(&f, when); err != nil {
		return f, err
	}
	if kind, rest, ok := strings.Cut(what, ":"); ok {
		f.Kind = Kind(kind)
		switch f.Kind {
		case Latency:
			target, amount, ok := strings.Cut(rest, "=")
			if !ok {
				return f, errors.New("latency needs an amount: latency:redis=20ms or latency:redis=20ms±10ms")
			}
			if err := parseTarget(&f, target); err != nil {
				return f, err
			}
			if err := parseLatency(&f, amount); err != nil {
				return f, err
			}
			if f.Duration == 0 {
				return f, errors.New("latency needs a duration: @4s+6s")
			}
		case Reset, Partition:
			if err := parseTarget(&f, rest); err != nil {
				return f, err
			}
			if f.Kind == Partition && f.Duration == 0 {
				return f, errors.New("partition needs a duration: @5s+2s")
			}
		default:
			return f, fmt.Errorf("unknown network fault %q: want latency, reset or partition", kind)
		}
		return f, nil
	}
	if what == string(AppCrash) {
		f.Kind, f.Target = AppCrash, App
		if f.Duration != 0 {
			return f, errors.New("app-crash is instant: no +duration")
		}
		return f, nil
	}
	if what == string(LocalFail) {
		f.Kind, f.Target = LocalFail, Local
		if f.Duration == 0 {
			return f, errors.New("local-fail needs a duration: @5s+2s")
		}
		return f, nil
	}
	target, kind, ok := strings.Cut(what, "-")
	if !ok {
		return f, fmt.Errorf("unknown fault %q (%s)", what, forms)
	}
	f.Kind = Kind(kind)
	if err := parseTarget(&f, target); err != nil {
		return f, err
	}
	switch f.Kind {
	case Pause:
		if f.Duration == 0 {
			return f, errors.New("pause needs a duration: @5s+3s")
		}
	case Restart:
	case Lose:
		if f.Target != Redis {
			return f, errors.New("lose is a Redis fault: MySQL is the system of record, its commits durable")
		}
		if f.Duration == 0 {
			return f, errors.New("lose needs the window it loses: redis-lose@5s+2s (back at 7 s holding what it held at 5 s)")
		}
	default:
		return f, fmt.Errorf("unknown process fault %q: want pause, restart or lose", kind)
	}
	return f, nil
}

// parseSvc reads the rest of an svc- fault: svc-kill@T[+D][:i],
// svc-pause@T+D[:i], svc-clock@T[+D]:i=±OFFSET.
func parseSvc(what, when string) (Fault, error) {
	f := Fault{Target: Svc, Kind: Kind(what)}
	if what == string(Svc)+"-"+string(SvcKill) {
		f.Kind = SvcKill
	}
	var offset string
	if f.Kind == SvcClock {
		var ok bool
		if when, offset, ok = strings.Cut(when, "="); !ok {
			return f, errors.New("svc-clock needs an instance and an offset: svc-clock@4s:0=+2s")
		}
	}
	w, idx, hasIdx := strings.Cut(when, ":")
	switch {
	case hasIdx:
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 {
			return f, fmt.Errorf("instance %q: want :i, the instance's index from 0", idx)
		}
		when, f.Instance = w, n
	case f.Kind == SvcPause:
		f.Instance = AllInstances
	case f.Kind == SvcClock:
		return f, errors.New("svc-clock needs an instance: svc-clock@4s:0=+2s (each instance has its own clock)")
	}
	if err := parseWhen(&f, when); err != nil {
		return f, err
	}
	switch f.Kind {
	case SvcPause:
		if f.Duration == 0 {
			return f, errors.New("svc-pause needs a duration: @5s+3s")
		}
	case SvcClock:
		d, err := time.ParseDuration(offset)
		if err != nil {
			return f, fmt.Errorf("offset %q: not a duration (e.g. +2s, -500ms)", offset)
		}
		if d == 0 {
			return f, errors.New("offset 0: a clock offset above or below 0")
		}
		if d%time.Millisecond != 0 {
			return f, fmt.Errorf("offset %s: in whole milliseconds (deadlines are kept to the millisecond)", offset)
		}
		f.Offset = d
	}
	return f, nil
}

func parseTarget(f *Fault, s string) error {
	switch Target(s) {
	case Redis, MySQL:
		f.Target = Target(s)
		return nil
	}
	return fmt.Errorf("target %q: want redis or mysql", s)
}

func parseWhen(f *Fault, s string) error {
	at, dur, hasDur := strings.Cut(s, "+")
	var err error
	if f.At, err = parseDuration("start", at); err != nil {
		return err
	}
	if hasDur {
		if f.Duration, err = parseDuration("duration", dur); err != nil {
			return err
		}
		if f.Duration == 0 {
			return errors.New("duration +0: leave it out, or give one above 0")
		}
	}
	return nil
}

func parseDuration(what, s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty %s", what)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not a duration (e.g. 5s, 1500ms)", what, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %s is negative", what, s)
	}
	return d, nil
}

func parseLatency(f *Fault, s string) error {
	lat, jit, hasJit := strings.Cut(s, "±")
	if !hasJit {
		lat, jit, hasJit = strings.Cut(s, "+-")
	}
	var err error
	if f.Latency, err = parseDuration("latency", lat); err != nil {
		return err
	}
	if f.Latency < time.Millisecond {
		return fmt.Errorf("latency %s: want at least 1ms", lat)
	}
	if hasJit {
		if f.Jitter, err = parseDuration("jitter", jit); err != nil {
			return err
		}
		if f.Jitter > f.Latency {
			return fmt.Errorf("jitter %s above the latency %s (a delay cannot be negative)", jit, lat)
		}
	}
	for _, d := range []time.Duration{f.Latency, f.Jitter} {
		if d%time.Millisecond != 0 {
			return fmt.Errorf("latency and jitter in whole milliseconds, not %s", d)
		}
	}
	return nil
}

// Plan is a run's faults, sorted by start time, no two overlapping on one
// target.
type Plan []Fault

// ParsePlan parses each spec and checks the plan.
func ParsePlan(specs []string) (Plan, error) {
	var p Plan
	for _, s := range specs {
		f, err := Parse(s)
		if err != nil {
			return nil, err
		}
		p = append(p, f)
	}
	return NewPlan(p...)
}

// NewPlan sorts the faults and checks that no two overlap on one target.
func NewPlan(fs ...Fault) (Plan, error) {
	p := append(Plan(nil), fs...)
	sort.SliceStable(p, func(i, j int) bool { return p[i].At < p[j].At })
	return p, p.Validate()
}

// Validate refuses faults that overlap on one target: two faults on one
// store at once would undo each other (a resume ending a restart, a toxic
// removed under another). An instant fault overlaps one whose window holds
// its instant.
func (p Plan) Validate() error {
	for i, a := range p {
		for _, b := range p[i+1:] {
			if a.Target == b.Target && sameInstance(a, b) && overlap(a, b) {
				return fmt.Errorf("faults %s and %s overlap on %s: one fault per target at a time", a, b, a.Target)
			}
		}
	}
	return nil
}

// sameInstance: two faults on one target hit one instance (an svc- fault
// on every instance hits each).
func sameInstance(a, b Fault) bool {
	return a.Instance == b.Instance || a.Instance == AllInstances || b.Instance == AllInstances
}

// overlap treats an instant fault as the window [At, At].
func overlap(a, b Fault) bool {
	if a.At == b.At {
		return true
	}
	if a.At > b.At {
		a, b = b, a
	}
	return b.At < a.End()
}

// For checks the plan against a backend: external servers are not
// stockbench's, so only network faults (and app-crash, which is the
// harness's own) are allowed there.
func (p Plan) For(backend string) error {
	if backend != "external" {
		return nil
	}
	for _, f := range p {
		if f.Process() {
			return fmt.Errorf("fault %s: the external backend allows only network faults (latency, reset, partition) and app-crash: its servers are not stockbench's to pause or restart", f)
		}
	}
	return nil
}

// NeedsProxy reports whether any fault goes through the proxy (which should
// sit in the path only then: it costs a copy per round trip).
func (p Plan) NeedsProxy() bool {
	for _, f := range p {
		if f.Network() {
			return true
		}
	}
	return false
}

// NeedsFaulter reports whether any fault acts on a server process.
func (p Plan) NeedsFaulter() bool {
	for _, f := range p {
		if f.Process() {
			return true
		}
	}
	return false
}

// Strings are the plan's canonical specs.
func (p Plan) Strings() []string {
	out := make([]string, len(p))
	for i, f := range p {
		out[i] = f.String()
	}
	return out
}
