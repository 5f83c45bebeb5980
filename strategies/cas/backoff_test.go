package cas

import (
	"testing"
	"time"
)

// TestBackoff checks the fair backoff: a draw from the shared window divided
// by the buyer's age (older buyers wait less, never more), and a give-up once
// the wait would end past the budget.
func TestBackoff(t *testing.T) {
	highest := func(n time.Duration) time.Duration { return n - 1 }
	cases := []struct {
		name       string
		attempt    int
		window     time.Duration
		left       time.Duration
		want       time.Duration
		wantGiveUp bool
	}{
		{"first retry draws from the whole window", 1, 80 * time.Millisecond, time.Second, 80*time.Millisecond - 1, false},
		{"an older buyer draws from a smaller part", 4, 80 * time.Millisecond, time.Second, 20*time.Millisecond - 1, false},
		{"age stops at 8: no buyer waits for nothing", 1000, 80 * time.Millisecond, time.Second, 10*time.Millisecond - 1, false},
		{"budget nearly spent: give up", 1, 80 * time.Millisecond, 10 * time.Millisecond, 80*time.Millisecond - 1, true},
		{"no budget left: give up", 8, 80 * time.Millisecond, 0, 10*time.Millisecond - 1, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, giveUp := backoff(c.attempt, c.window, c.left, highest)
			if got != c.want || giveUp != c.wantGiveUp {
				t.Fatalf("backoff(%d, %s, %s) = %s, %v; want %s, %v", c.attempt, c.window, c.left, got, giveUp, c.want, c.wantGiveUp)
			}
		})
	}
}

// TestNextWindow checks the shared window: it grows on misses, shrinks on
// successes, and stays within its bounds.
func TestNextWindow(t *testing.T) {
	cases := []struct {
		name string
		w    time.Duration
		hit  bool
		want time.Duration
	}{
		{"a miss grows it", 100 * time.Millisecond, false, 110 * time.Millisecond},
		{"a success shrinks it", 100 * time.Millisecond, true, 95 * time.Millisecond},
		{"never below the floor", windowMin, true, windowMin},
		{"never above the cap", windowMax, false, windowMax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := nextWindow(c.w, c.hit); got != c.want {
				t.Fatalf("nextWindow(%s, %v) = %s, want %s", c.w, c.hit, got, c.want)
			}
		})
	}
}
