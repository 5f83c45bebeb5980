package observe

import (
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/results"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    Threshold
		wantErr bool
	}{
		{in: "anomaly", want: Threshold{Metric: Anomaly}},
		{in: " Anomaly ", want: Threshold{Metric: Anomaly}},
		{in: "p99>500ms for 30s", want: Threshold{Metric: P99, Above: true, Value: 500, For: 30 * time.Second}},
		{in: "p99 > 1.5s", want: Threshold{Metric: P99, Above: true, Value: 1500}},
		{in: "flows<100/s for 10s", want: Threshold{Metric: Flows, Value: 100, For: 10 * time.Second}},
		{in: "errors>5/s", want: Threshold{Metric: Errors, Above: true, Value: 5}},
		{in: "errors>0", want: Threshold{Metric: Errors, Above: true, Value: 0}},
		{in: "", wantErr: true},
		{in: "p99", wantErr: true},
		{in: "p99>fast", wantErr: true},
		{in: "p98>5ms", wantErr: true},
		{in: "flows<lots/s", wantErr: true},
		{in: "flows<-3/s", wantErr: true},
		{in: "flows<100/s for ever", wantErr: true},
		{in: "flows<100/s for -1s", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			if (err != nil) != c.wantErr {
				t.Fatalf("Parse(%q) error %v, want error %v", c.in, err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			c.want.Text = got.Text
			if got != c.want || got.Text == "" {
				t.Fatalf("Parse(%q) = %+v, want %+v", c.in, got, c.want)
			}
		})
	}
}

func TestWatch(t *testing.T) {
	mustParse := func(s string) Threshold {
		th, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return th
	}
	type sec struct {
		flows  int64
		p99    float64
		errors int64
	}
	cases := []struct {
		name    string
		th      string
		seconds []sec
		// wantAt is the second (from 1) whose end breaches; 0: none.
		wantAt int
	}{
		{"p99 holds 3 s", "p99>500ms for 3s", []sec{{10, 600, 0}, {10, 700, 0}, {10, 800, 0}}, 3},
		{"p99 streak broken", "p99>500ms for 3s", []sec{{10, 600, 0}, {10, 100, 0}, {10, 800, 0}, {10, 900, 0}}, 0},
		{"p99 seconds without flows neither count nor break", "p99>500ms for 2s", []sec{{10, 600, 0}, {0, 0, 0}, {10, 900, 0}}, 3},
		{"flows low for 2 s", "flows<100/s for 2s", []sec{{200, 1, 0}, {50, 1, 0}, {0, 0, 0}}, 3},
		{"flows low once, no for: one second", "flows<100/s", []sec{{200, 1, 0}, {99, 1, 0}}, 2},
		{"flows at the bound is not below", "flows<100/s", []sec{{100, 1, 0}}, 0},
		{"errors", "errors>5/s for 1500ms", []sec{{1, 1, 6}, {1, 1, 6}, {1, 1, 0}}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWatch([]Threshold{mustParse(c.th)})
			got := 0
			for i, s := range c.seconds {
				bs := w.Observe(Second{At: time.Duration(i+1) * time.Second, Flows: s.flows, P99MS: s.p99, Errors: s.errors})
				if len(bs) > 0 {
					if got != 0 {
						t.Fatalf("breached twice: at %d and %d", got, i+1)
					}
					got = i + 1
					if bs[0].Reason == "" || bs[0].At != time.Duration(i+1)*time.Second {
						t.Fatalf("breach %+v", bs[0])
					}
				}
			}
			if got != c.wantAt {
				t.Fatalf("breached at second %d, want %d", got, c.wantAt)
			}
			// The end-of-run check reads the same seconds from a series.
			run := results.Run{}
			for i, s := range c.seconds {
				run.Series = append(run.Series, results.SeriesPoint{Second: i + 1, Flows: s.flows, FlowP99MS: s.p99, Errors: s.errors})
			}
			bs := Check(run, []Threshold{mustParse(c.th)})
			if (len(bs) > 0) != (c.wantAt > 0) || (len(bs) > 0 && bs[0].At != time.Duration(c.wantAt)*time.Second) {
				t.Fatalf("Check: %+v, want a breach at %d s", bs, c.wantAt)
			}
		})
	}
}

func TestAnomaly(t *testing.T) {
	th, err := Parse("anomaly")
	if err != nil {
		t.Fatal(err)
	}
	w := NewWatch([]Threshold{th})
	if bs := w.Observe(Second{At: time.Second}); len(bs) != 0 {
		t.Fatalf("no violation, breach %+v", bs)
	}
	b, ok := w.Violation(1500*time.Millisecond, "mysql A: available -1 < 0")
	if !ok || b.At != 1500*time.Millisecond || b.Threshold.Metric != Anomaly {
		t.Fatalf("violation: %+v %v", b, ok)
	}
	if _, again := w.Violation(2*time.Second, "x"); again {
		t.Fatal("an anomaly threshold fired twice")
	}
	if bs := NewWatch([]Threshold{{Metric: P99, Above: true, Value: 1}}); bs == nil {
		t.Fatal("nil watch")
	} else if _, ok := bs.Violation(time.Second, "x"); ok {
		t.Fatal("a violation breached a p99 threshold")
	}
	clean := results.Run{}
	if bs := Check(clean, []Threshold{th}); len(bs) != 0 {
		t.Fatalf("clean run breached: %+v", bs)
	}
	bad := results.Run{Audit: audit.Audit{OversoldUnits: 3}}
	if bs := Check(bad, []Threshold{th}); len(bs) != 1 {
		t.Fatalf("oversold run: %+v", bs)
	}
}
