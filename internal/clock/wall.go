package clock

import (
	"sync/atomic"
	"time"
)

// offset is this process's wall-clock skew, in nanoseconds (svc-clock).
//
// It is the one piece of process-wide state in the project, on purpose: it
// stands for the host's clock, which every part of a process reads alike
// and which a second process on the same box does not share. Only `serve`
// sets it (--clock-offset, or an svc-clock fault at run time); a run, its
// generators and the tests leave it at zero.
var offset atomic.Int64

// Now is the wall-clock time as this process's host clock reads it:
// time.Now shifted by the offset SetOffset set. Every wall-clock reading
// of the service tier goes through it — timestamps a strategy writes,
// expiry deadlines it compares, a TTL it turns into a deadline, the
// sweeper's and the reconcilers' cut-offs — so that an svc-clock fault
// skews all of them at once, as a skewed host clock would. The result
// carries no monotonic reading: durations measured between two calls are
// wall-clock differences. Timers, timeouts and context deadlines do not
// use it (a host's clock step does not move Go's monotonic timers either).
// Safe for concurrent use.
func Now() time.Time {
	t := time.Now().Round(0)
	if d := offset.Load(); d != 0 {
		t = t.Add(time.Duration(d))
	}
	return t
}

// SetOffset sets the process's clock offset (positive: the clock runs
// ahead). Safe for concurrent use; readings after it returns see it.
func SetOffset(d time.Duration) { offset.Store(int64(d)) }

// Offset is the process's clock offset.
func Offset() time.Duration { return time.Duration(offset.Load()) }
