package scenarios

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// perSecond plays a schedule to its end (at most n arrivals) and counts
// the arrivals in each second, checking they come in order.
func perSecond(t *testing.T, p Profile, n int) []int {
	t.Helper()
	s := NewSchedule(p, n, 1)
	var out []int
	last := time.Duration(-1)
	for {
		at, ok := s.Next()
		if !ok {
			return out
		}
		if at < last {
			t.Fatalf("arrival at %v after one at %v", at, last)
		}
		last = at
		sec := int(at / time.Second)
		for len(out) <= sec {
			out = append(out, 0)
		}
		out[sec]++
	}
}

func mustProfile(t *testing.T, s string) Profile {
	t.Helper()
	p, err := ParseProfile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSchedule: each profile places arrivals where it says, counted per
// second (deterministic profiles exactly; random ones within bounds).
func TestSchedule(t *testing.T) {
	dir := t.TempDir()
	curve := filepath.Join(dir, "curve.csv")
	os.WriteFile(curve, []byte("second,rate\n0,10\n1,0\n2,30\n"), 0o644)
	late := filepath.Join(dir, "late.csv")
	os.WriteFile(late, []byte("2,5\n3,7\n"), 0o644)
	cases := []struct {
		name, profile string
		n             int
		want          []int // exact counts per second (nil: use check)
		check         func(t *testing.T, counts []int)
	}{
		{name: "all at once", profile: "0", n: 500, want: []int{500}},
		{name: "all, spelled out", profile: "all", n: 3, want: []int{3}},
		{name: "a fixed delay", profile: "2500ms", n: 4, want: []int{0, 0, 4}},
		{name: "uniform window", profile: "0-4s", n: 4000, check: func(t *testing.T, c []int) {
			if len(c) != 4 {
				t.Fatalf("%v: want 4 seconds", c)
			}
			for _, v := range c {
				if v < 800 || v > 1200 {
					t.Fatalf("%v: not uniform", c)
				}
			}
		}},
		{name: "poisson", profile: "poisson:1000", n: 5000, check: func(t *testing.T, c []int) {
			if len(c) < 4 || len(c) > 6 {
				t.Fatalf("%v: 5000 arrivals at 1000/s should take about 5 s", c)
			}
			for _, v := range c[:4] {
				if v < 850 || v > 1150 {
					t.Fatalf("%v: not about 1000/s", c)
				}
			}
		}},
		// Ramp 0→100 over 1 s (50 arrivals), hold 100/s for 2 s, ramp down
		// to 0 over 1 s (50): the curve ends before the buyers do.
		{name: "stages", profile: "stages:1s@100,2s@100,1s@0", n: 1000, want: []int{50, 100, 100, 50}},
		{name: "stages jump", profile: "stages:0s@20,2s@20", n: 1000, want: []int{20, 20}},
		{name: "stages stop at the buyers", profile: "stages:0s@40,3s@40", n: 60, want: []int{40, 20}},
		{name: "stages slow ramp", profile: "stages:3s@100", n: 1000, want: []int{17, 50, 83}},
		{name: "csv replay", profile: "csv:" + curve, n: 1000, want: []int{10, 0, 30}},
		{name: "csv starting late", profile: "csv:" + late, n: 1000, want: []int{0, 0, 5, 7}},
		{name: "spike after background", profile: "spike:100@3s", n: 1000, check: func(t *testing.T, c []int) {
			if len(c) != 4 || c[3] < 650 || c[3] > 750 {
				t.Fatalf("%v: want about 300 background arrivals over 3 s, the rest at 3 s", c)
			}
		}},
		{name: "spike spread", profile: "spike:0@1s+0-2s", n: 1000, check: func(t *testing.T, c []int) {
			if len(c) != 3 || c[0] != 0 || c[1] < 400 || c[2] < 400 {
				t.Fatalf("%v: want the spike spread over seconds 1 and 2", c)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := perSecond(t, mustProfile(t, c.profile), c.n)
			if c.want != nil && !slices.Equal(got, c.want) {
				t.Fatalf("per second %v, want %v", got, c.want)
			}
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

// TestProfileErrors: malformed profiles are refused with one line.
func TestProfileErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	cases := []struct{ name, profile, want string }{
		{"unknown kind", "burst:5", "unknown arrival kind"},
		{"bad range", "1s-0s", "upper bound"},
		{"poisson without rate", "poisson:", "poisson"},
		{"poisson negative", "poisson:-4", "poisson"},
		{"empty stages", "stages:", "no stages"},
		{"stage without rate", "stages:1s", "DURATION@RATE"},
		{"stage negative rate", "stages:1s@-1", "negative rate"},
		{"stage bad duration", "stages:soon@5", "stage"},
		{"stages of no time", "stages:0s@5", "no time"},
		{"spike without start", "spike:100", "spike:RATE@T0"},
		{"spike bad spread", "spike:100@1s+2s-1s", "spread"},
		{"csv missing file", "csv:" + filepath.Join(dir, "none.csv"), "rate curve"},
		{"csv empty", "csv:" + file("empty.csv", ""), "no second,rate line"},
		{"csv header only", "csv:" + file("header.csv", "second,rate\n"), "no second,rate line"},
		{"csv negative rate", "csv:" + file("neg.csv", "0,5\n1,-2\n"), "negative"},
		{"csv negative second", "csv:" + file("negsec.csv", "-1,5\n"), "negative"},
		{"csv unsorted", "csv:" + file("unsorted.csv", "0,5\n2,5\n1,5\n"), "seconds must increase"},
		{"csv repeated second", "csv:" + file("repeat.csv", "0,5\n0,6\n"), "seconds must increase"},
		{"csv malformed line", "csv:" + file("bad.csv", "0,5\nlots\n"), "want second,rate"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseProfile(c.profile)
			if err == nil {
				t.Fatalf("%q accepted", c.profile)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line with %q", err, c.want)
			}
		})
	}
}

// TestProfileString: a profile reads back as given.
func TestProfileString(t *testing.T) {
	for _, s := range []string{"0-50ms", "poisson:5000", "stages:1s@100,2s@0", "spike:200@5s+0-100ms"} {
		p := mustProfile(t, s)
		if p.String() != s {
			t.Fatalf("%q reads back as %q", s, p.String())
		}
		if q := mustProfile(t, p.String()); q.Kind != p.Kind {
			t.Fatalf("%q: kind %q then %q", s, p.Kind, q.Kind)
		}
	}
	if mustProfile(t, "0-1s").Rated() || !mustProfile(t, "poisson:5").Rated() {
		t.Fatal("Rated wrong")
	}
}
