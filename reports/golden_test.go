package reports

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"golang.org/x/net/html"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from its golden file; if the change is intended run go test ./reports -update\n--- got ---\n%s", name, got)
	}
}

func fixtureResults(t *testing.T) *results.Results {
	t.Helper()
	r, err := results.ReadJSON("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGolden pins summary.md, the CSV files and the JSON layout rendered
// from a fixed results file (a real run's, kept in testdata).
func TestGolden(t *testing.T) {
	r := fixtureResults(t)
	golden(t, "summary.md", []byte(Summary(analysis.Analyze(r))))
	page, err := htmlPage(analysis.Analyze(r), nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "index.html", page)
	golden(t, "summary.csv", summaryCSV(r))
	golden(t, "series.csv", seriesCSV(r))
	dir := t.TempDir()
	if err := results.WriteJSON(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	keyPaths(v, "", paths)
	var list []string
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)
	for _, p := range list {
		if p != strings.ToLower(p) {
			t.Errorf("results.json key %s is not lower case", p)
		}
	}
	golden(t, "results-layout.txt", []byte(strings.Join(list, "\n")+"\n"))
}

// keyPaths collects the key paths of a JSON value; array elements share
// one path ("runs[].tps"), maps keyed by data (counters, counts, config)
// are not descended into beyond their own key.
func keyPaths(v any, prefix string, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			switch k {
			case "counters", "counts", "config", "journeys", "harness":
				continue
			}
			keyPaths(x, p, out)
		}
	case []any:
		for _, x := range v {
			keyPaths(x, prefix+"[]", out)
		}
	}
}

// TestHTMLSelfContained parses index.html and checks that it references
// nothing outside itself: no script, no stylesheet link, no src or href
// other than fragment links.
func TestHTMLSelfContained(t *testing.T) {
	r := fixtureResults(t)
	charts, err := Charts(analysis.Analyze(r))
	if err != nil {
		t.Fatal(err)
	}
	b, err := htmlPage(analysis.Analyze(r), charts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	svgs, tables := 0, 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "link", "img", "iframe", "object":
				t.Errorf("index.html has a <%s> element", n.Data)
			case "svg":
				svgs++
			case "table":
				tables++
			}
			for _, a := range n.Attr {
				if (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") {
					t.Errorf("<%s %s=%q> points outside the page", n.Data, a.Key, a.Val)
				}
				if strings.Contains(a.Val, "url(http") {
					t.Errorf("<%s> loads %q", n.Data, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if svgs != len(charts) || svgs < 4 {
		t.Errorf("%d inline charts, want %d", svgs, len(charts))
	}
	if tables < 5 {
		t.Errorf("%d tables, want comparison, recommendation, audit, latency, calibration", tables)
	}
	for _, want := range []string{"Comparison", "Recommendation", "Audit", "Configuration", "Environment", r.Env.RedisVersion, "MariaDB"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}
