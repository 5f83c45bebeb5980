package cas

import (
	"testing"
	"time"
)

// TestBackoff checks the fair backoff: equal jitter within [bound/2, bound),
// a bound that doubles to a small cap whatever the attempt number (no buyer
// sleeps ever longer), and a give-up once the wait would pass the budget.
func TestBackoff(t *testing.T) {
	lowest := func(n time.Duration) time.Duration { return 0 }
	highest := func(n time.Duration) time.Duration { return n - 1 }
	cases := []struct {
		name       string
		attempt    int
		left       time.Duration
		rnd        func(time.Duration) time.Duration
		want       time.Duration
		wantGiveUp bool
	}{
		{"first retry, lowest draw", 1, time.Second, lowest, backoffBase / 2, false},
		{"first retry, highest draw", 1, time.Second, highest, backoffBase - 1, false},
		{"bound doubles", 3, time.Second, lowest, 2 * backoffBase, false},
		{"capped at attempt 10", 10, time.Second, highest, backoffMax - 1, false},
		{"capped at attempt 10000: no starvation", 10000, time.Second, lowest, backoffMax / 2, false},
		{"budget nearly spent: give up", 5, backoffMax / 4, lowest, backoffMax / 2, true},
		{"no budget left: give up", 1, 0, lowest, backoffBase / 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, giveUp := backoff(c.attempt, c.left, c.rnd)
			if got != c.want || giveUp != c.wantGiveUp {
				t.Fatalf("backoff(%d, %s) = %s, %v; want %s, %v", c.attempt, c.left, got, giveUp, c.want, c.wantGiveUp)
			}
		})
	}
}
