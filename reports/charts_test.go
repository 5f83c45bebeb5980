package reports

import (
	"bytes"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// TestWriteCharts renders every chart of a real run's results and checks
// that each exists as PNG and SVG of the expected size and is not blank.
func TestWriteCharts(t *testing.T) {
	r, err := results.ReadJSON("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	charts, err := writeCharts(dir, analysis.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range charts {
		names = append(names, c.Name)
	}
	for _, want := range []string{"tps-flash", "p99-flash", "oversell-flash", "spectrum-flash", "tps-sustained", "tps-over-time-sustained", "p99-over-time-sustained"} {
		if !slices.Contains(names, want) {
			t.Errorf("chart %s missing (have %v)", want, names)
		}
	}
	for _, c := range charts {
		b, err := os.ReadFile(filepath.Join(dir, "charts", c.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s.png: %v", c.Name, err)
		}
		if sz := img.Bounds().Size(); sz.X != 768 || sz.Y != 432 {
			t.Errorf("%s.png is %v, want 768×432", c.Name, sz)
		}
		colors := map[uint32]bool{}
		for y := 0; y < 432; y += 4 {
			for x := 0; x < 768; x += 4 {
				r, g, b, _ := img.At(x, y).RGBA()
				colors[r<<16^g<<8^b] = true
			}
		}
		if len(colors) < 3 {
			t.Errorf("%s.png looks blank (%d colours)", c.Name, len(colors))
		}
		svg, err := os.ReadFile(filepath.Join(dir, "charts", c.Name+".svg"))
		if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "576pt") {
			t.Errorf("%s.svg not an 8-inch SVG (err %v)", c.Name, err)
		}
	}
}
