package analysis

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/stockbench/stockbench/results"
)

func uslPoints(l, s, k float64, ns ...float64) []USLPoint {
	u := USL{Lambda: l, Sigma: s, Kappa: k}
	var out []USLPoint
	for _, n := range ns {
		out = append(out, USLPoint{N: n, X: u.X(n)})
	}
	return out
}

// TestFitUSL recovers known σ, κ and λ from exact synthetic points, and
// from points with a known ±2 % wobble within a looser tolerance.
func TestFitUSL(t *testing.T) {
	ns := []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
	cases := []struct {
		name           string
		pts            []USLPoint
		l, s, k        float64
		tol            float64 // relative, on λ; absolute on σ; relative on κ
		minR2, wantN   float64
		wantInfinitePk bool
	}{
		{"contention and coherency", uslPoints(1000, 0.05, 0.0002, ns...), 1000, 0.05, 0.0002, 1e-4, 0.9999, math.Sqrt(0.95 / 0.0002), false},
		{"serialised (σ≈1)", uslPoints(800, 0.97, 0.00001, ns...), 800, 0.97, 0.00001, 1e-3, 0.999, math.Sqrt(0.03 / 0.00001), false},
		{"Amdahl: no coherency", uslPoints(500, 0.1, 0, ns...), 500, 0.1, 0, 1e-4, 0.9999, math.Inf(1), true},
		{"linear", uslPoints(300, 0, 0, ns...), 300, 0, 0, 1e-4, 0.9999, math.Inf(1), true},
		{"±2% wobble", func() []USLPoint {
			p := uslPoints(1000, 0.05, 0.0002, ns...)
			for i := range p {
				p[i].X *= 1 + 0.02*float64(1-2*(i%2))
			}
			return p
		}(), 1000, 0.05, 0.0002, 0.02, 0.98, math.Sqrt(0.95 / 0.0002), false},
	}
	// rowlock on a crowded box (sweep --param buyers=1,…,256, docker,
	// load 20-30): the search left κ at 1.6e-20, a peak at 7·10⁹ buyers.
	crowded := []USLPoint{{1, 85.8}, {2, 51.2}, {4, 197.8}, {8, 215.8}, {16, 154.8}, {32, 192.4}, {64, 231}, {128, 235.8}, {256, 319}}
	if u, err := FitUSL(crowded); err != nil || u.Kappa != 0 || !math.IsInf(u.PeakN, 1) {
		t.Errorf("crowded rowlock: κ=%g N*=%g (%v), want κ 0 and no peak", u.Kappa, u.PeakN, err)
	}
	for _, tc := range cases {
		u, err := FitUSL(tc.pts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if math.Abs(u.Lambda-tc.l) > tc.tol*tc.l || math.Abs(u.Sigma-tc.s) > tc.tol ||
			(tc.k == 0 && u.Kappa > 1e-6) || (tc.k > 0 && math.Abs(u.Kappa-tc.k) > 10*tc.tol*tc.k) {
			t.Errorf("%s: λ=%g σ=%g κ=%g, want %g %g %g", tc.name, u.Lambda, u.Sigma, u.Kappa, tc.l, tc.s, tc.k)
		}
		if u.R2 < tc.minR2 || u.R2 > 1 {
			t.Errorf("%s: R² = %g, want ≥ %g", tc.name, u.R2, tc.minR2)
		}
		if tc.wantInfinitePk && !math.IsInf(u.PeakN, 1) && u.PeakN < 1e3 {
			t.Errorf("%s: N* = %g, want no peak in range", tc.name, u.PeakN)
		}
		if !tc.wantInfinitePk && math.Abs(u.PeakN-tc.wantN) > 0.2*tc.wantN {
			t.Errorf("%s: N* = %g, want %g", tc.name, u.PeakN, tc.wantN)
		}
	}
}

// TestFitUSLRefuses too few or bad points.
func TestFitUSLRefuses(t *testing.T) {
	cases := [][]USLPoint{
		nil,
		{{1, 10}, {2, 19}},
		{{4, 10}, {4, 11}, {4, 12}},
		{{1, 10}, {2, 0}, {4, 30}},
		{{0, 10}, {2, 19}, {4, 30}},
	}
	for _, pts := range cases {
		if _, err := FitUSL(pts); !errors.Is(err, ErrUSLPoints) {
			t.Errorf("FitUSL(%v) = %v, want ErrUSLPoints", pts, err)
		}
	}
}

// TestUSLFits fits each strategy of a buyers sweep from its runs, and
// nothing for another sweep.
func TestUSLFits(t *testing.T) {
	u := USL{Lambda: 100, Sigma: 0.2, Kappa: 0.001}
	r := &results.Results{Sweep: &results.Sweep{Param: "buyers", Values: []string{"1", "4", "16", "64"}}}
	for _, v := range r.Sweep.Values {
		n, _ := strconv.ParseFloat(v, 64)
		r.Runs = append(r.Runs, results.Run{Strategy: "rowlock", Scenario: "sustained", Param: "buyers", Value: v, TPS: u.X(n)})
		if v != "64" {
			r.Runs = append(r.Runs, results.Run{Strategy: "cas", Scenario: "sustained", Param: "buyers", Value: v, TPS: 10})
		}
	}
	fits := USLFits(r)
	if len(fits) != 2 || fits[0].Strategy != "rowlock" || fits[1].Strategy != "cas" {
		t.Fatalf("fits %+v", fits)
	}
	if f := fits[0]; f.Err != "" || math.Abs(f.Fit.Sigma-0.2) > 1e-3 || f.Fit.R2 < 0.999 {
		t.Errorf("rowlock: %+v", f)
	}
	if f := fits[1]; f.Err != "" || f.Fit.Points != 3 {
		t.Errorf("cas (3 points, flat): %+v", f)
	}
	r.Sweep.Param = "rtt"
	if fits := USLFits(r); fits != nil {
		t.Errorf("an rtt sweep has USL fits: %+v", fits)
	}
}
