package reports

import (
	"fmt"
	"hash/fnv"
	"image/color"
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Style is how every chart draws one strategy: its colour, its marker and
// the dashes of its lines. It depends on the strategy's name only, never on
// its position in a run, so a strategy looks the same in every chart of
// every report (PNG, SVG and the HTML page alike).
type Style struct {
	Color color.RGBA
	// Marker is the shape of the strategy's points (filled; Hollow gives
	// the outline of the same shape).
	Marker Marker
	// Dashes of the strategy's lines (nil: solid).
	Dashes []vg.Length
}

// Hex is the style's colour as "#rrggbb", for the HTML page.
func (s Style) Hex() string {
	return fmt.Sprintf("#%02x%02x%02x", s.Color.R, s.Color.G, s.Color.B)
}

func rgb(hex uint32) color.RGBA {
	return color.RGBA{R: uint8(hex >> 16), G: uint8(hex >> 8), B: uint8(hex), A: 255}
}

// knownStyles fixes the look of the strategies this tool ships. Colours are
// from the Okabe–Ito colour-blind-safe set; none is red, which the charts
// keep for anomalies.
var knownStyles = map[string]Style{
	"rowlock":      {Color: rgb(0x0072B2), Marker: Marker{Shape: ShapeSquare}},
	"cas":          {Color: rgb(0xE69F00), Marker: Marker{Shape: ShapeTriangleDown}, Dashes: dash(6, 2)},
	"conditional":  {Color: rgb(0x009E73), Marker: Marker{Shape: ShapeDiamond}, Dashes: dash(2, 2)},
	"lua-tcc":      {Color: rgb(0xCC79A7), Marker: Marker{Shape: ShapeTriangleUp}, Dashes: dash(5, 2, 1, 2)},
	"outbox":       {Color: rgb(0x56B4E9), Marker: Marker{Shape: ShapeCircle}, Dashes: dash(8, 3)},
	"naive":        {Color: rgb(0x4D4D4D), Marker: Marker{Shape: ShapePentagon}, Dashes: dash(1, 2)},
	"batched":      {Color: rgb(0x8C510A), Marker: Marker{Shape: ShapeHexagon}, Dashes: dash(10, 2, 2, 2)},
	"outbox-local": {Color: rgb(0x35978F), Marker: Marker{Shape: ShapeOctagon}, Dashes: dash(8, 3, 2, 3)},
	"buckets":      {Color: rgb(0x9467BD), Marker: Marker{Shape: ShapeTriangleRight}, Dashes: dash(4, 2)},
	"skiplocked":   {Color: rgb(0xBCBD22), Marker: Marker{Shape: ShapeTriangleLeft}, Dashes: dash(3, 1, 3, 3)},
}

// otherColors serve strategies this table does not know, picked by a hash
// of the name.
var otherColors = []color.RGBA{rgb(0x17BECF), rgb(0x1B7837), rgb(0x762A83), rgb(0xF0E442), rgb(0x999999), rgb(0x01665E)}

// anomalyColor is the red of a run the auditor caught with an anomaly.
var anomalyColor = rgb(0xD00000)

func dash(pts ...float64) []vg.Length {
	out := make([]vg.Length, len(pts))
	for i, p := range pts {
		out[i] = vg.Points(p)
	}
	return out
}

// styleOf returns the style of a strategy: fixed for the strategies this
// tool ships, and derived from a hash of the name for any other, so it is
// stable across runs and reports either way.
func styleOf(strategy string) Style {
	if s, ok := knownStyles[strategy]; ok {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(strategy))
	n := h.Sum32()
	return Style{
		Color:  otherColors[n%uint32(len(otherColors))],
		Marker: Marker{Shape: Shape(n / uint32(len(otherColors)) % uint32(shapeCount))},
		Dashes: dash(3, float64(1+n%3)),
	}
}

// Shape names a marker outline.
type Shape int

// The marker shapes, one per shipped strategy.
const (
	ShapeCircle Shape = iota
	ShapeSquare
	ShapeTriangleUp
	ShapeTriangleDown
	ShapeDiamond
	ShapePentagon
	ShapeHexagon
	ShapeTriangleLeft
	ShapeTriangleRight
	ShapeOctagon
	shapeCount
)

// Marker draws a strategy's point: its shape, filled or as an outline.
// It implements draw.GlyphDrawer.
type Marker struct {
	Shape  Shape
	Hollow bool
}

// DrawGlyph draws the marker centred on pt in sty's colour and radius.
func (m Marker) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	var p vg.Path
	r := sty.Radius
	if m.Shape == ShapeCircle {
		p.Move(vg.Point{X: pt.X + r, Y: pt.Y})
		p.Arc(pt, r, 0, 2*math.Pi)
	} else {
		// A regular polygon: its sides and the angle of its first corner.
		sides, start := 4, math.Pi/4
		switch m.Shape {
		case ShapeTriangleUp:
			sides, start = 3, math.Pi/2
		case ShapeTriangleDown:
			sides, start = 3, -math.Pi/2
		case ShapeDiamond:
			sides, start = 4, math.Pi/2
		case ShapePentagon:
			sides, start = 5, math.Pi/2
		case ShapeHexagon:
			sides, start = 6, 0
		case ShapeTriangleLeft:
			sides, start = 3, math.Pi
		case ShapeTriangleRight:
			sides, start = 3, 0
		case ShapeOctagon:
			sides, start = 8, math.Pi/8
		}
		if m.Shape != ShapeSquare {
			r *= 1.15 // pointed shapes look smaller than a square of the same radius
		}
		for i := 0; i < sides; i++ {
			a := start + 2*math.Pi*float64(i)/float64(sides)
			q := vg.Point{X: pt.X + r*vg.Length(math.Cos(a)), Y: pt.Y + r*vg.Length(math.Sin(a))}
			if i == 0 {
				p.Move(q)
			} else {
				p.Line(q)
			}
		}
	}
	p.Close()
	if m.Hollow {
		c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.5)})
		c.Stroke(p)
		return
	}
	c.Fill(p)
}
