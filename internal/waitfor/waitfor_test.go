package waitfor

import "testing"

// TestUntil returns once the condition holds, after as many looks as it
// takes.
func TestUntil(t *testing.T) {
	cases := []struct {
		name  string
		looks int // the look on which cond first holds
	}{
		{"holds at once", 1},
		{"holds on the fifth look", 5},
	}
	for _, c := range cases {
		n := 0
		Until(t, c.name, func() bool { n++; return n >= c.looks })
		if n != c.looks {
			t.Errorf("%s: %d looks, want %d", c.name, n, c.looks)
		}
	}
}
