// Package waitfor lets tests wait for an event they cannot be told of
// directly (a row appears, a lock is freed, a call has queued) by looking
// again until it holds. The bound is generous: only a hang reaches it, never
// a busy machine, so no test depends on how fast the machine is.
package waitfor

import (
	"runtime"
	"testing"
	"time"
)

// Within is how long Until looks before it fails the test.
const Within = 2 * time.Minute

// Until calls cond until it returns true, yielding between looks, and fails
// the test with what (and the time waited) if Within passes first. cond may
// call t.Fatal itself on an error.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > Within {
			t.Fatalf("after %s: %s", time.Since(start).Round(time.Second), what)
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond)
	}
}
