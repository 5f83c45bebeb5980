package runner

import (
	"testing"
	"time"
)

// TestCPUAccWait: the run-queue wait accumulates across readings; a drop
// (a thread ended) counts as no wait, a new process (a restart) counts its
// whole wait, and one reading without it makes the figure unknown.
func TestCPUAccWait(t *testing.T) {
	ms := time.Millisecond
	r := func(id int, wait time.Duration, ok bool) cpuReading {
		return cpuReading{id: id, wait: wait, waitOK: ok}
	}
	cases := []struct {
		name   string
		reads  []cpuReading
		want   time.Duration
		wantOK bool
	}{
		{"steady", []cpuReading{r(1, 10*ms, true), r(1, 30*ms, true), r(1, 35*ms, true)}, 25 * ms, true},
		{"a thread ended", []cpuReading{r(1, 10*ms, true), r(1, 40*ms, true), r(1, 20*ms, true), r(1, 25*ms, true)}, 35 * ms, true},
		{"restarted server", []cpuReading{r(1, 10*ms, true), r(1, 30*ms, true), r(2, 5*ms, true), r(2, 9*ms, true)}, 29 * ms, true},
		{"no wait at first", []cpuReading{r(1, 0, false), r(1, 30*ms, true)}, 0, false},
		{"lost midway", []cpuReading{r(1, 10*ms, true), r(1, 0, false), r(1, 30*ms, true)}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := &cpuAcc{first: c.reads[0], last: c.reads[0], waitOK: c.reads[0].waitOK}
			for _, x := range c.reads[1:] {
				a.add(x)
			}
			if a.waitOK != c.wantOK || (c.wantOK && a.wait != c.want) {
				t.Errorf("wait %v (ok %v), want %v (ok %v)", a.wait, a.waitOK, c.want, c.wantOK)
			}
		})
	}
}
