package clock

import (
	"context"
	"testing"
	"time"
)

// TestSleep: a context that has ended stops the wait; an open one lets a
// zero-length wait pass.
func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"ended context, long wait", ctx, time.Hour, false},
		{"open context, no wait", context.Background(), 0, true},
	}
	for _, c := range cases {
		if got := Sleep(c.ctx, c.d); got != c.want {
			t.Errorf("%s: Sleep = %v, want %v", c.name, got, c.want)
		}
	}
}
