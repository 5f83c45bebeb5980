package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"path/filepath"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// htmlPage renders index.html: one self-contained page (inline CSS and SVG, no
// script, no external reference) laid out from the same view as
// summary.md (summaryOf) — every section, every anomaly class — with the
// charts, the configuration and the environment.
func htmlPage(a *analysis.Analysis, charts []Chart) ([]byte, error) {
	r := a.Results
	cfg, err := json.MarshalIndent(r.Config, "", "  ")
	if err != nil {
		return nil, err
	}
	env, err := json.MarshalIndent(r.Env, "", "  ")
	if err != nil {
		return nil, err
	}
	views := make([]chartView, len(charts))
	for i, c := range charts {
		svg := string(c.SVG)
		if i := strings.Index(svg, "<svg"); i >= 0 {
			svg = svg[i:] // drop the XML prolog: the SVG goes inline
		}
		views[i] = chartView{ID: "chart-" + c.Name, Title: c.Title, SVG: template.HTML(svg)}
	}
	data := htmlView{summaryView: summaryOf(a), Charts: views, ConfigJSON: string(cfg), EnvJSON: string(env),
		Caveat: oneHostCaveat(r), Curve: a.Curve}
	var b bytes.Buffer
	if err := page.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("index.html: %w", err)
	}
	return b.Bytes(), nil
}

// htmlView is index.html's data: summary.md's view, and what only the
// page shows.
type htmlView struct {
	summaryView
	Charts              []chartView
	ConfigJSON, EnvJSON string
	Caveat              string
	Curve               *analysis.Curve
}

type chartView struct {
	ID, Title string
	SVG       template.HTML
}

// writeHTML writes index.html into dir.
func writeHTML(dir string, a *analysis.Analysis, charts []Chart) error {
	b, err := htmlPage(a, charts)
	if err != nil {
		return err
	}
	return results.WriteFileAtomic(filepath.Join(dir, "index.html"), b)
}

var page = template.Must(template.New("index").Funcs(template.FuncMap{
	// swatch is the strategy's chart colour, for a key beside its name.
	"swatch": func(strategy string) template.CSS { return template.CSS("background:" + styleOf(strategy).Hex()) },
	"html":   func(t table, swatch bool) htmlTable { return t.html(swatch) },
	"join":   strings.Join,
}).Parse(`{{define "table"}}<div class="wide"><table>
<tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}{{if .Strategy}}<td class="name"><span class="sw" style="{{swatch .Strategy}}"></span>{{.Text}}</td>{{else}}<td{{with .Class}} class="{{.}}"{{end}}>{{if .Range}}{{.Median}}<br><span class="mm">{{.Range}}</span>{{else}}{{.Text}}{{end}}</td>{{end}}{{end}}</tr>
{{end}}</table></div>{{end}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>stockbench results</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: .85em; }
.wide { overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: right; }
th:first-child, td:first-child, td.l { text-align: left; }
th { background: #f3f3f3; }
.bad { color: #b00; font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.charts figure { margin: 0; }
.charts figure { width: calc(50% - .5em); }
.charts svg { width: 100%; height: auto; border: 1px solid #eee; }
td.name { white-space: nowrap; text-align: left; }
.mm { font-size: .8em; color: #555; white-space: nowrap; }
.sw { display: inline-block; width: .8em; height: .8em; margin-right: .4em; border-radius: 2px; }
nav.toc { background: #f7f7f7; padding: .6em 1em; line-height: 1.6; }
pre { background: #f7f7f7; padding: 1em; overflow: auto; }
</style>
</head>
<body>
<h1>stockbench results</h1>
{{if .Interrupted}}<p class="bad">Interrupted: the run was stopped early; the figures cover what was measured, and its runs are unproven.</p>{{end}}
<p>Backend {{.Env.Backend}} · MySQL {{.Env.MySQLVersion}}{{with .Isolation}} ({{.}}){{end}} · Redis {{.Env.RedisVersion}} · {{.Env.Cores}} cores ({{.Env.CPUModel}}) · {{.Env.StartedAt}}</p>
{{with .Network}}<p>{{.}}</p>{{end}}{{with .Budget}}
<p>{{.}}</p>{{end}}
{{range .Problems}}<p class="bad">Note: {{.}}</p>
{{end}}<nav class="toc"><b>Contents</b>
<a href="#comparison">Comparison</a>{{if .Flash}} · <a href="#flash">Flash sale</a>{{end}}{{if .Repeats.Head}} · <a href="#repeats">Repeats</a>{{end}}{{if .Sweep}} · <a href="#sweep">Sweep</a>{{end}}{{if .Article}} · <a href="#article">Beside the article</a>{{end}}{{if .Recommendation}} · <a href="#recommendation">Recommendation</a>{{end}}{{if .Faults}} · <a href="#faults">Fault matrix</a>{{end}}{{if .Curve}} · <a href="#curve">Latency vs load</a>{{end}}{{if .Drift.Table.Rows}} · <a href="#drift">Drift</a>{{end}}{{if .Spread.Rows}} · <a href="#spread">Spread</a>{{end}}{{if .Calibration}} · <a href="#calibration">Calibration</a>{{end}} · <a href="#charts">Charts</a> · <a href="#audit">Audit</a>{{if .TwoAudits}} · <a href="#twoaudits">Two audits</a>{{end}}{{if .Generators}} · <a href="#generators">Generators</a>{{end}} · <a href="#latency">Latency</a> · <a href="#outcomes">Outcomes</a> · <a href="#configuration">Configuration</a> · <a href="#environment">Environment</a>
<br><b>Units</b> TPS: completed reserve+confirm flows / s · latency: ms, pay delay excluded · oversell: % of confirmed units · anomalies: units or acks counted by the auditor · server CPU: % of one core</nav>

<h2 id="comparison">Comparison</h2>
{{template "table" html .Comparison true}}
<p>TPS: completed reserve+confirm flows per second of the measured phase; flows: their count (warm-up excluded). Flow P99: of the whole flow, pay delay excluded. The anomaly columns are the auditor's, from the stores, over the whole run; oversell %: oversold units / confirmed units. A run with any anomaly is UNSAFE; a run whose audit did not finish is unproven. With repeats each cell is the median (min–max); every repeat is listed below. The colour beside each name is the strategy's in every chart.</p>

{{with .Flash}}<h2 id="flash">Flash sale</h2>
{{template "table" html .Table true}}
<p>{{.Explained}} The millisecond timelines are under Charts.</p>
{{range .Services}}<p>{{.Strategy}} ({{.Label}}): service model {{.Inflight}} calls in flight, queue {{.Queue}}; {{.Shed}} requests shed, deepest queue {{.PeakQueue}}.</p>
{{end}}{{end}}
{{if .Repeats.Head}}<h2 id="repeats">Repeats (each run the headline folds)</h2>
{{template "table" html .Repeats true}}{{end}}

{{with .Sweep}}<h2 id="sweep">Sweep of --{{.Param}} over {{join .Values ", "}}</h2>
{{if .RTT.Head}}<h3>Throughput and P99 against the network's RTT</h3>
{{template "table" html .RTT false}}{{end}}{{if .USL.Head}}
<h3>Scalability: the Universal Scalability Law fitted per strategy</h3>
{{template "table" html .USL false}}
<p>X(N) = λN / (1 + σ(N−1) + κN(N−1)), fitted by least squares to every run (buyers, flows/s): σ is the serialised share (1: one at a time), κ the crosstalk that makes throughput fall past the peak N* = √((1−σ)/κ); κ = 0 levels off at λ/σ. On a crowded machine the points scatter and R² falls: read σ and κ only beside a high R².</p>{{end}}
{{if .Numeric}}<h3>Where the verdicts cross</h3>
<ul>{{range .Crossings}}<li>{{.Metric}}: {{.Before}} leads below ≈{{.X}}{{with $.Sweep.Unit}} {{.}}{{end}}, {{.After}} above (between {{.Lo}} and {{.Hi}}).</li>
{{else}}<li>No two safe strategies swap places on throughput or P99 over the swept {{.Param}}.</li>
{{end}}</ul>{{end}}
{{with .Caveat}}<p><b>On one machine:</b> {{.}}</p>{{end}}{{end}}

{{with .Article}}<h2 id="article">Beside the article (--preset article)</h2>
<p>Each pair is the article's published figure, then the one measured in this run (median, min–max over repeats). The article's figures are quoted, not measured here. Source: {{.Source}}.</p>
{{template "table" html .Table true}}
<p>Setup differences:</p>
<ul>{{range .Differences}}<li>{{.}}</li>{{end}}</ul>{{end}}

{{with .Recommendation}}<h2 id="recommendation">Recommendation for this workload</h2>
<p>Weights: {{.Weights}}. Scores are computed from the figures measured in this run only. Safety comes first: a strategy with any anomaly ({{.UnsafeTitles}}) is UNSAFE and ranks after every other, one whose audit did not finish is unproven and ranks after every clean one, whatever its score; within each group a strategy whose flash sale did not sell out while it turned buyers away ranks after those that sold out; the weights order strategies only within each group.</p>
{{template "table" html .Table false}}
<ol>{{range .Recs}}<li>{{.Reason}}</li>{{end}}</ol>{{end}}

{{with .Faults}}<h2 id="faults">Fault matrix</h2>
<p>Each cell: the worst anomaly the auditor found after settle under that fault, the most seconds of the measured phase without a completed flow, and how long after the fault ended throughput was back at half its pre-fault rate (heat map: <a href="#chart-fault-matrix">chart</a>; green clean, amber clean with an outage, red an anomaly). Redis persistence: {{.Persistence}}. Fault times are from the start of the measured phase.</p>
{{template "table" html .Matrix true}}
<p>Per run: errors by class inside the fault windows (start to one second after the end) and outside, units lost (leaked) and re-sold (oversold), anomalies at the end of load and after settle.</p>
{{template "table" html .Runs true}}{{end}}

{{with .Curve}}<h2 id="curve">Latency vs load: highest rate under P99 ≤ {{printf "%.0f" .SLOP99MS}} ms</h2>
<table>
<tr><th>strategy</th><th>highest rate held (arrivals/s)</th><th>stopped at</th><th>why</th></tr>
{{range .Points}}<tr><td>{{.Strategy}}</td><td>{{printf "%.0f" .MaxRate}}</td><td>{{if .StoppedAt}}{{printf "%.0f" .StoppedAt}}{{else}}—{{end}}</td><td class="l">{{.Stop.Why}}</td></tr>
{{end}}</table>{{end}}

{{if .Drift.Table.Rows}}<h2 id="drift">Drift over the run</h2>
<p>{{.Drift.Explained}}</p>
{{template "table" html .Drift.Table true}}{{end}}
{{range .Drift.Verdicts}}<p>{{.Strategy}} ({{.Label}}): {{if .FallingBehind}}<b class="bad">{{.Verdict}}</b>{{else}}{{.Verdict}}{{end}}.</p>
{{end}}
{{if .Spread.Rows}}<h2 id="spread">Spread over repeats (min / median / max)</h2>
{{template "table" html .Spread true}}{{end}}

{{with .Calibration}}<h2 id="calibration">Calibration (raw ceilings, concurrency {{.Concurrency}}, {{.DurationSec}} s each)</h2>
{{template "table" html .Probes false}}
{{template "table" html .Runs true}}{{end}}

<h2 id="charts">Charts</h2>
<p>Each strategy has one colour and marker in every chart. Bars and points are medians over repeats; whiskers span min–max. In the trade-off chart a hollow marker in a red ring means the auditor found an anomaly.</p>
{{with .Caveat}}<p class="caveat"><b>On one machine:</b> {{.}}</p>
{{end}}<div class="charts">
{{range .Charts}}<figure id="{{.ID}}">{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}</div>

<h2 id="audit">Audit (whole run, warm-up included)</h2>
{{template "table" html .Audit true}}
{{range .Violations}}<p>{{.Strategy}} ({{.Label}}) violations:</p>
<ul>{{range .Items}}<li class="bad">{{.}}</li>{{end}}</ul>
{{end}}
{{with .TwoAudits}}<h2 id="twoaudits">Audit at the end of load and after settle</h2>
<p>The stores are graded twice: when the load ends, before any strategy code repairs anything, and after the strategy's Settle.</p>
{{template "table" html .Table true}}
{{range .Repaired}}<p>{{.Strategy}} ({{.Label}}): settle repaired {{join .Items ", "}}.</p>
{{end}}{{end}}
{{with .Generators}}<h2 id="generators">Generators</h2>
<p>Each run was played by several generator processes, merged exactly (histograms) and audited once. A generator is saturated when the generators of its host used more than {{.SaturatedPct}} % of its cores together: its figures may be the generators' limit, not the stores'.</p>
{{template "table" html .Table true}}{{end}}

<h2 id="latency">Latency (ms)</h2>
{{template "table" html .Latency true}}

<h2 id="outcomes">Outcomes by operation</h2>
<ul>{{range .Outcomes}}<li><b>{{.Strategy}}</b> ({{.Label}}): {{join .Ops "; "}}{{with .Counters}}; counters: {{join . ", "}}{{end}}{{range .Errors}}<br><span class="bad">error: {{.}}</span>{{end}}</li>
{{end}}</ul>

<h2 id="configuration">Configuration</h2>
<pre>{{.ConfigJSON}}</pre>
<h2 id="environment">Environment</h2>
<pre>{{.EnvJSON}}</pre>
</body>
</html>
`))
