package reports

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// presetResults is the fixture as a --preset article run.
func presetResults(t *testing.T) *results.Results {
	t.Helper()
	r := fixtureResults(t)
	r.Config.Preset = ArticlePreset
	return r
}

// TestArticleBeside: a preset run's summary.md and index.html show each of
// the article's figures beside the measured one, and list the setup
// differences from what the run recorded; any other run shows none of it.
func TestArticleBeside(t *testing.T) {
	for _, c := range []struct {
		name   string
		r      *results.Results
		preset bool
	}{
		{"preset article", presetResults(t), true},
		{"plain run", fixtureResults(t), false},
	} {
		charts, err := Charts(analysis.Analyze(c.r))
		if err != nil {
			t.Fatal(err)
		}
		page, err := htmlPage(analysis.Analyze(c.r), charts)
		if err != nil {
			t.Fatal(err)
		}
		md := Summary(analysis.Analyze(c.r))
		wants := []string{
			"| rowlock | sustained | 620 | 867.7 | 180 | 153.73 |", // article TPS and P99 beside the measured
			"| lua-tcc | sustained | 4580 | 2833.3 | 8 |",
			"| outbox | sustained | 6120 | 1738.7 | 6 |",
			"| naive | flash | – | 228.1 | – |",
			"| 13.5 | 16.667 |", // the article's no-atomicity oversell beside naive's
			"MySQL 8.0; this run ran 10.11.19-MariaDB",
			"Redis 6.2; this run ran Redis 7.0.15",
			"4-core, 8 GB cloud server; this run had 2 cores",
		}
		for _, w := range wants {
			if strings.Contains(md, w) != c.preset {
				t.Errorf("%s: summary.md contains %q = %v, want %v", c.name, w, !c.preset, c.preset)
			}
		}
		for _, w := range []string{`id="article"`, "4580", "MySQL 8.0"} {
			if bytes.Contains(page, []byte(w)) != c.preset {
				t.Errorf("%s: index.html contains %q = %v, want %v", c.name, w, !c.preset, c.preset)
			}
		}
		names := map[string]bool{}
		for _, ch := range charts {
			names[ch.Name] = true
		}
		for _, n := range []string{"article-tps", "article-p99", "article-oversell"} {
			if names[n] != c.preset {
				t.Errorf("%s: chart %s present = %v, want %v", c.name, n, names[n], c.preset)
			}
		}
		for _, ch := range charts {
			if ch.Name == "tradeoff-sustained" && bytes.Contains(ch.SVG, []byte("article: rowlock")) != c.preset {
				t.Errorf("%s: trade-off chart shows the article's points = %v, want %v", c.name, !c.preset, c.preset)
			}
		}
	}
}

// TestRepeatedHeadline: a 3-repeat run gives one headline row per strategy
// with median (min–max) in summary.md and index.html, and every repeat in
// the table below.
func TestRepeatedHeadline(t *testing.T) {
	r := repeated(t, "naive", "outbox", "rowlock")
	md := Summary(analysis.Analyze(r))
	head := md[strings.Index(md, "## Comparison"):strings.Index(md, "## Repeats")]
	for _, s := range []string{"naive", "outbox", "rowlock"} {
		if n := strings.Count(head, "| "+s+" | sustained | 3 |"); n != 1 {
			t.Errorf("headline has %d rows for %s, want 1:\n%s", n, s, head)
		}
	}
	// rowlock's TPS: 867.7 × 0.8, × 1, × 1.3.
	if !strings.Contains(head, "867.7 (694.1–1128.0)") {
		t.Errorf("headline lacks rowlock's median (min–max):\n%s", head)
	}
	rep := md[strings.Index(md, "## Repeats"):]
	for _, w := range []string{"| rowlock | sustained | 1 | 694.1 |", "| rowlock | sustained | 3 | 1128.0 |"} {
		if !strings.Contains(rep, w) {
			t.Errorf("repeats table lacks %q", w)
		}
	}
	charts, err := Charts(analysis.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	page, err := htmlPage(analysis.Analyze(r), charts)
	if err != nil {
		t.Fatal(err)
	}
	cmp := string(page[bytes.Index(page, []byte(`id="comparison"`)):bytes.Index(page, []byte(`id="repeats"`))])
	if n := strings.Count(cmp, "<tr>"); n != 4 {
		t.Errorf("index.html comparison has %d rows, want a header and 3", n)
	}
	if !strings.Contains(cmp, `867.7<br><span class="mm">694.1–1128.0</span>`) {
		t.Error("index.html comparison lacks rowlock's median (min–max)")
	}
}

// TestHTMLContents: every table-of-contents link of index.html leads to a
// section of the page, and the units are stated.
func TestHTMLContents(t *testing.T) {
	for _, r := range []*results.Results{fixtureResults(t), presetResults(t), repeated(t, "naive", "rowlock")} {
		charts, err := Charts(analysis.Analyze(r))
		if err != nil {
			t.Fatal(err)
		}
		page, err := htmlPage(analysis.Analyze(r), charts)
		if err != nil {
			t.Fatal(err)
		}
		links := regexp.MustCompile(`href="#([^"]+)"`).FindAllSubmatch(page, -1)
		if len(links) < 7 {
			t.Errorf("table of contents has %d links", len(links))
		}
		for _, l := range links {
			if !bytes.Contains(page, []byte(`id="`+string(l[1])+`"`)) {
				t.Errorf("contents link #%s leads nowhere", l[1])
			}
		}
		for _, w := range []string{"<b>Units</b>", "flows / s", "ms, pay delay excluded", "% of one core"} {
			if !bytes.Contains(page, []byte(w)) {
				t.Errorf("index.html lacks %q", w)
			}
		}
	}
}
