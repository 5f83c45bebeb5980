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

// TestNowOffset: the offset moves Now's reading by itself, both ways, and
// zero puts it back.
func TestNowOffset(t *testing.T) {
	defer SetOffset(0)
	cases := []struct {
		name   string
		offset time.Duration
	}{
		{"ahead", 2 * time.Second},
		{"behind", -3 * time.Second},
		{"none", 0},
	}
	for _, c := range cases {
		SetOffset(c.offset)
		before := time.Now()
		got := Now()
		after := time.Now()
		if Offset() != c.offset {
			t.Errorf("%s: Offset = %s", c.name, Offset())
		}
		lo, hi := before.Add(c.offset).Round(0), after.Add(c.offset).Round(0)
		if got.Before(lo) || got.After(hi) {
			t.Errorf("%s: Now = %s, want within [%s, %s]", c.name, got, lo, hi)
		}
		if got != got.Round(0) {
			t.Errorf("%s: Now carries a monotonic reading", c.name)
		}
	}
}
