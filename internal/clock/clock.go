// Package clock holds the one way this project waits: for a duration or
// until its context ends, whichever comes first.
package clock

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends; it reports whether the full wait
// passed (false: ctx ended first). Safe for concurrent use.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
