package reports

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// repeated builds a 3-repeat results value from the fixture's sustained
// runs of the named strategies, in that order: each repeat scales TPS and
// P99, so the spread is known.
func repeated(t *testing.T, names ...string) *results.Results {
	t.Helper()
	src := fixtureResults(t)
	out := &results.Results{Format: results.Format, Config: src.Config, Env: src.Env}
	for _, name := range names {
		for i, f := range []float64{0.8, 1, 1.3} {
			for _, run := range src.Runs {
				if run.Strategy != name || run.Scenario != "sustained" {
					continue
				}
				run.Repeat = i + 1
				run.TPS *= f
				lat := map[string]results.Percentiles{}
				for k, v := range run.LatencyMS {
					v.P99 *= f
					lat[k] = v
				}
				run.LatencyMS = lat
				out.Runs = append(out.Runs, run)
			}
		}
	}
	return out
}

// chartPNG renders the named chart of r as PNG, decodes it, and returns it
// with the functions that map data coordinates to its pixels.
func chartPNG(t *testing.T, r *results.Results, name string) (image.Image, func(x, y float64) image.Point) {
	t.Helper()
	plots, err := buildPlots(analysis.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range plots {
		if np.name != name {
			continue
		}
		b, err := render(np, "png")
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := vgimg.New(chartW, chartH)
		dc := np.p.DataCanvas(draw.New(c))
		tx, ty := np.p.Transforms(&dc)
		px := func(l vg.Length) int { return int(math.Round(float64(l / vg.Inch * 96))) }
		h := img.Bounds().Dy()
		return img, func(x, y float64) image.Point { return image.Point{X: px(tx(x)), Y: h - px(ty(y))} }
	}
	t.Fatalf("no chart %s", name)
	return nil, nil
}

func rgbaAt(img image.Image, p image.Point) color.RGBA {
	r, g, b, _ := img.At(p.X, p.Y).RGBA()
	return color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 255}
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) int { return max(int(x), int(y)) - min(int(x), int(y)) }
	return d(a.R, b.R) < 24 && d(a.G, b.G) < 24 && d(a.B, b.B) < 24
}

// TestSameStrategySameColour decodes two PNG bar charts whose strategies
// come in different orders and subsets, reads the colour inside each bar,
// and checks that a strategy has its own colour, the same in both.
func TestSameStrategySameColour(t *testing.T) {
	all := fixtureResults(t)                         // rowlock, cas, conditional, lua-tcc, outbox, naive
	few := repeated(t, "naive", "outbox", "rowlock") // naive first: an index-keyed palette would give it rowlock's colour
	seen := map[string]color.RGBA{}
	for _, c := range []struct {
		r     *results.Results
		chart string
	}{{all, "tps-flash"}, {few, "tps-sustained"}, {all, "oversell-sustained"}} {
		img, at := chartPNG(t, c.r, c.chart)
		for i, row := range rowsOf(c.r, strings.TrimPrefix(strings.TrimPrefix(c.chart, "tps-"), "oversell-")) {
			v := results.SpreadOf(row.Runs, func(r results.Run) float64 { return r.TPS }).Median
			if strings.HasPrefix(c.chart, "oversell-") {
				v = 100 * results.SpreadOf(row.Runs, func(r results.Run) float64 { return r.Audit.OversellRate }).Median
				if v == 0 {
					continue // no bar to read
				}
			}
			p := at(float64(i), v/3)
			p.X += 8 // beside the whisker, inside the bar
			got := rgbaAt(img, p)
			if want := styleOf(row.Strategy).Color; !near(got, want) {
				t.Errorf("%s: %s bar at %v is %v, want its colour %v", c.chart, row.Strategy, p, got, want)
			}
			if prev, ok := seen[row.Strategy]; ok && !near(prev, got) {
				t.Errorf("%s: %s is %v here and %v in an earlier chart", c.chart, row.Strategy, got, prev)
			}
			seen[row.Strategy] = got
		}
	}
	for a, ca := range seen {
		for b, cb := range seen {
			if a < b && near(ca, cb) {
				t.Errorf("%s and %s share a colour %v", a, b, ca)
			}
		}
	}
}

func rowsOf(r *results.Results, scenario string) []analysis.Row {
	var out []analysis.Row
	for _, row := range analysis.Analyze(r).Rows {
		if row.Scenario == scenario {
			out = append(out, row)
		}
	}
	return out
}

// TestWhiskers checks, in the PNG, that a repeated row's bar has a dark
// whisker reaching above the bar (halfway between median and max), and
// that a single run's bar has none there.
func TestWhiskers(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     *results.Results
		chart string
		val   func(results.Run) float64
		want  bool
	}{
		{"repeated TPS", repeated(t, "naive", "rowlock"), "tps-sustained", func(r results.Run) float64 { return r.TPS }, true},
		{"repeated P99", repeated(t, "naive", "rowlock"), "p99-sustained", func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }, true},
		{"single TPS", fixtureResults(t), "tps-sustained", func(r results.Run) float64 { return r.TPS }, false},
	} {
		img, at := chartPNG(t, c.r, c.chart)
		for i, row := range rowsOf(c.r, "sustained") {
			s := results.SpreadOf(row.Runs, c.val)
			top := s.Median * 1.15 // a single run: just above its bar
			if s.Max > s.Median {
				top = (s.Median + s.Max) / 2
			}
			px := rgbaAt(img, at(float64(i), top))
			dark := int(px.R)+int(px.G)+int(px.B) < 3*100
			if dark != c.want {
				t.Errorf("%s: %s pixel above the bar %v: dark=%v, want %v", c.name, row.Strategy, px, dark, c.want)
			}
		}
	}
}

// TestTradeoffMarksAnomalies reads the trade-off chart's PNG: a clean
// strategy's marker is filled with its colour and has no red ring; a
// strategy the auditor caught is hollow inside a red ring.
func TestTradeoffMarksAnomalies(t *testing.T) {
	r := fixtureResults(t) // sustained: outbox and naive have anomalies
	img, at := chartPNG(t, r, "tradeoff-sustained")
	ringPx := int(math.Round(11 * 96.0 / 72))
	var unsafeAt []image.Point
	for _, row := range rowsOf(r, "sustained") {
		if row.Safety.Kind == analysis.Unsafe {
			unsafeAt = append(unsafeAt, at(row.TPS, row.P99))
		}
	}
	if len(unsafeAt) == 0 {
		t.Fatal("fixture has no unsafe sustained run")
	}
	for _, row := range rowsOf(r, "sustained") {
		c := at(row.TPS, row.P99)
		red := 0
		for a := 0.0; a < 2*math.Pi; a += math.Pi / 16 {
			p := image.Point{X: c.X + int(math.Round(float64(ringPx)*math.Cos(a))), Y: c.Y + int(math.Round(float64(ringPx)*math.Sin(a)))}
			if near(rgbaAt(img, p), anomalyColor) {
				red++
			}
		}
		filled := near(rgbaAt(img, c), styleOf(row.Strategy).Color)
		if row.Safety.Kind == analysis.Unsafe {
			if red < 8 || filled {
				t.Errorf("%s has anomalies: red ring points %d (want ≥ 8), centre filled %v (want hollow)", row.Strategy, red, filled)
			}
			continue
		}
		for _, u := range unsafeAt {
			if d := c.Sub(u); d.X*d.X+d.Y*d.Y < 4*ringPx*ringPx {
				red = 0 // its ring may cross an unsafe neighbour's
			}
		}
		if red > 0 || !filled {
			t.Errorf("%s is clean: red ring points %d (want 0), centre filled %v (want filled)", row.Strategy, red, filled)
		}
	}
}

// TestStyleOf: a strategy's style is keyed by its name only, and the
// shipped strategies each have their own colour and marker.
func TestStyleOf(t *testing.T) {
	if a, b := styleOf("some-new-strategy"), styleOf("some-new-strategy"); a.Color != b.Color || a.Marker != b.Marker {
		t.Error("unknown strategy: style not stable")
	}
	colours, shapes := map[color.RGBA]string{}, map[Shape]string{}
	for name, s := range knownStyles {
		if s.Color == anomalyColor {
			t.Errorf("%s uses the anomaly red", name)
		}
		if o, ok := colours[s.Color]; ok {
			t.Errorf("%s and %s share a colour", name, o)
		}
		if o, ok := shapes[s.Marker.Shape]; ok {
			t.Errorf("%s and %s share a marker", name, o)
		}
		colours[s.Color], shapes[s.Marker.Shape] = name, name
	}
}
