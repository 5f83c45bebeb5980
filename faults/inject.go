package faults

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/servers"
)

// AppCrashHook carries out an app-crash: the runner drops the strategy
// instance while flows are in flight and starts a new one on the same
// stores. It returns when the new instance serves (or with why not).
type AppCrashHook func(ctx context.Context, f Fault) error

// Services kills, restarts, freezes and skews the clocks of the service
// processes of a run (run --service process:N), for svc-kill, svc-pause
// and svc-clock. Its methods are called from the injector's goroutines,
// one fault per instance at a time.
type Services interface {
	// Kill ends instance i with SIGKILL and returns once it is gone.
	Kill(ctx context.Context, i int) error
	// Restart starts instance i again on its state directory and at its
	// address, and returns once it answers its health check.
	Restart(ctx context.Context, i int) error
	// Pause freezes instance i (SIGSTOP; AllInstances: every one) and
	// Resume lets it run again (SIGCONT). Both return once signalled.
	Pause(ctx context.Context, i int) error
	Resume(ctx context.Context, i int) error
	// SetClock offsets instance i's wall clock by d (0: the true time)
	// and returns once the instance reads it; a restart of instance i
	// keeps it.
	SetClock(ctx context.Context, i int, d time.Duration) error
}

// LocalFailHook carries out a local-fail fault: on is true when it starts
// (the service's local table takes no write) and false when it ends.
type LocalFailHook func(ctx context.Context, on bool) error

// Event is what happened to one fault of the plan: when it was applied and
// undone (offsets from the start of load, and wall-clock times), and any
// error. Undone is zero (with ok false in Done) when the fault was never
// applied.
type Event struct {
	Fault Fault
	// Applied is when the fault took effect: for an instant restart,
	// when the kill began (Undone is when the server answered again).
	Applied time.Time
	// Undone is when it was over: resumed, toxics removed, the restarted
	// server answering; for an instant reset or app-crash, Applied.
	Undone time.Time
	// Start and End are Applied and Undone as offsets from the start time.
	Start, End time.Duration
	// Err says what failed (applying, undoing, or the context ending
	// first); empty when all went to plan.
	Err string
	// Cancelled is true when the context ended while the fault was on and
	// the injector undid it early.
	Cancelled bool
}

// Injector executes a plan against the run's servers: process faults
// through Faulter, network faults through Proxy, app-crash through
// OnAppCrash. Missing what a fault needs is an error at Run, before
// anything is applied.
type Injector struct {
	Plan       Plan
	Faulter    servers.Faulter
	Proxy      *Proxy
	OnAppCrash AppCrashHook
	// Services carries out svc-kill, svc-pause and svc-clock faults.
	Services Services
	// OnLocalFail carries out local-fail faults.
	OnLocalFail LocalFailHook
	// OnEvent, when set, is called as each fault is applied (with Undone
	// zero) and as it is over: the live timeline, for the runner's
	// per-second marks.
	OnEvent func(Event)
	// UndoTimeout bounds the undo of a fault after ctx ended (a restart
	// waits for the server to answer). Default 3 minutes.
	UndoTimeout time.Duration
}

// Check says whether the injector has what each fault of its plan needs.
func (in *Injector) Check() error {
	if err := in.Plan.Validate(); err != nil {
		return err
	}
	for _, f := range in.Plan {
		switch {
		case f.Process() && in.Faulter == nil:
			return fmt.Errorf("fault %s: no process faults on these servers", f)
		case f.Kind == Lose && !canLose(in.Faulter):
			return fmt.Errorf("fault %s: these servers cannot be rolled back (a Redis or Redis Cluster that stockbench started, local or docker, can)", f)
		case f.Network() && in.Proxy == nil:
			return fmt.Errorf("fault %s: no proxy in front of the stores (faults.Listen)", f)
		case f.Kind == AppCrash && in.OnAppCrash == nil:
			return fmt.Errorf("fault %s: no app-crash hook", f)
		case f.Service() && in.Services == nil:
			return fmt.Errorf("fault %s: no service processes (run --service process:N)", f)
		case f.Kind == LocalFail && in.OnLocalFail == nil:
			return fmt.Errorf("fault %s: no local-fail hook", f)
		}
	}
	return nil
}

// Run applies each fault at start+At and undoes it at start+End, the
// faults of different targets concurrently, and returns the timeline in
// plan order once every fault is over. When ctx ends it undoes at once
// whatever is on (resumes paused servers, restarts killed ones, removes
// toxics) and returns: nothing is left paused. The error joins the
// faults' errors; the timeline says which.
func (in *Injector) Run(ctx context.Context, start time.Time) ([]Event, error) {
	if err := in.Check(); err != nil {
		return nil, err
	}
	events := make([]Event, len(in.Plan))
	var wg sync.WaitGroup
	for i, f := range in.Plan {
		wg.Add(1)
		go func() {
			defer wg.Done()
			events[i] = in.one(ctx, start, f)
		}()
	}
	wg.Wait()
	var errs []error
	for _, e := range events {
		if e.Err != "" {
			errs = append(errs, fmt.Errorf("fault %s: %s", e.Fault, e.Err))
		}
	}
	return events, errors.Join(errs...)
}

func (in *Injector) notify(e Event) {
	if in.OnEvent != nil {
		in.OnEvent(e)
	}
}

// one runs one fault to its end.
func (in *Injector) one(ctx context.Context, start time.Time, f Fault) Event {
	e := Event{Fault: f}
	if !clock.Sleep(ctx, time.Until(start.Add(f.At))) {
		e.Err = "not applied: " + context.Cause(ctx).Error()
		return e
	}
	// A restart, once begun, is seen through even if ctx ends: a server
	// is never left down.
	actx := ctx
	if f.Kind == Restart || f.Kind == SvcKill {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(context.WithoutCancel(ctx), in.undoTimeout())
		defer cancel()
	}
	began := time.Now()
	if err := in.apply(actx, f); err != nil {
		e.Err = "apply: " + err.Error()
		if (f.Kind == Restart || f.Kind == SvcKill) && f.Duration > 0 {
			// A kill that failed half-way: bring the server back.
			if uerr := in.undo(actx, f); uerr != nil {
				e.Err += "; undo: " + uerr.Error()
			}
		}
		return e
	}
	e.Applied = time.Now()
	if f.Duration == 0 {
		e.Undone = e.Applied
		if f.Kind == Restart || f.Kind == AppCrash || f.Kind == SvcKill {
			// Down from the kill until the restarted server answered (the
			// new service instance served).
			e.Applied = began
		}
		e.Start, e.End = e.Applied.Sub(start), e.Undone.Sub(start)
		in.notify(e)
		return e
	}
	e.Start = e.Applied.Sub(start)
	in.notify(Event{Fault: f, Applied: e.Applied, Start: e.Start})
	undoCtx := ctx
	if !clock.Sleep(ctx, time.Until(start.Add(f.End()))) {
		e.Cancelled = true
		e.Err = "cut short: " + context.Cause(ctx).Error()
		var cancel context.CancelFunc
		undoCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), in.undoTimeout())
		defer cancel()
	}
	if f.Kind == Lose && !e.Cancelled {
		// The roll back kills the server: once begun it is seen through,
		// so the server is never left down.
		var cancel context.CancelFunc
		undoCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), in.undoTimeout())
		defer cancel()
	}
	if e.Cancelled && f.Kind == Lose {
		// The loss is the fault itself, not its undo: a run cut short
		// keeps its data.
		e.Undone, e.End = time.Now(), time.Since(start)
		in.notify(e)
		return e
	}
	if err := in.undo(undoCtx, f); err != nil {
		if e.Err != "" {
			e.Err += "; "
		}
		e.Err += "undo: " + err.Error()
	}
	e.Undone = time.Now()
	e.End = e.Undone.Sub(start)
	in.notify(e)
	return e
}

func (in *Injector) undoTimeout() time.Duration {
	if in.UndoTimeout > 0 {
		return in.UndoTimeout
	}
	return 3 * time.Minute
}

// apply puts a fault on. An instant restart is applied whole (kill, start,
// answering); an app-crash is the hook's call.
func (in *Injector) apply(ctx context.Context, f Fault) error {
	target := string(f.Target)
	switch f.Kind {
	case Pause:
		return in.Faulter.Pause(ctx, target)
	case Restart:
		if f.Duration == 0 {
			return in.Faulter.Restart(ctx, target)
		}
		return in.Faulter.Kill(ctx, target)
	case Latency, Reset, Partition:
		return in.Proxy.Apply(f)
	case AppCrash:
		return in.OnAppCrash(ctx, f)
	case LocalFail:
		return in.OnLocalFail(ctx, true)
	case Lose:
		return in.Faulter.(servers.DataLoser).Checkpoint(ctx, target)
	case SvcKill:
		if err := in.Services.Kill(ctx, f.Instance); err != nil || f.Duration > 0 {
			return err
		}
		return in.Services.Restart(ctx, f.Instance)
	case SvcPause:
		return in.Services.Pause(ctx, f.Instance)
	case SvcClock:
		return in.Services.SetClock(ctx, f.Instance, f.Offset)
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

// undo takes a fault off: resume, restart a killed server, remove toxics.
func (in *Injector) undo(ctx context.Context, f Fault) error {
	target := string(f.Target)
	switch f.Kind {
	case Pause:
		return in.Faulter.Resume(ctx, target)
	case Restart:
		if f.Duration == 0 {
			// Restart is whole; a failed one is not retried here.
			return nil
		}
		return in.Faulter.Restart(ctx, target)
	case Latency, Reset, Partition:
		return in.Proxy.Remove(f.Target)
	case Lose:
		return in.Faulter.(servers.DataLoser).RollBack(ctx, target)
	case SvcKill:
		if f.Duration == 0 {
			return nil // restarted in apply
		}
		return in.Services.Restart(ctx, f.Instance)
	case SvcPause:
		return in.Services.Resume(ctx, f.Instance)
	case SvcClock:
		return in.Services.SetClock(ctx, f.Instance, 0)
	case LocalFail:
		return in.OnLocalFail(ctx, false)
	}
	return nil
}

// canLose reports whether f can roll a server's data back.
func canLose(f servers.Faulter) bool {
	_, ok := f.(servers.DataLoser)
	return ok
}

// Windows are the timeline's fault windows as offsets, sorted by start,
// for marking per-second series: events never applied are left out.
func Windows(events []Event) [][2]time.Duration {
	var w [][2]time.Duration
	for _, e := range events {
		if !e.Applied.IsZero() {
			w = append(w, [2]time.Duration{e.Start, e.End})
		}
	}
	sort.Slice(w, func(i, j int) bool { return w[i][0] < w[j][0] })
	return w
}
