package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"path/filepath"
	"strings"

	"github.com/stockbench/stockbench/results"
)

// HTML renders index.html: one self-contained page (inline CSS and SVG, no
// script, no external reference) with the charts, the tables, the audit,
// the recommendation, the configuration and the environment.
func HTML(r *results.Results, charts []Chart) ([]byte, error) {
	cfg, err := json.MarshalIndent(r.Config, "", "  ")
	if err != nil {
		return nil, err
	}
	env, err := json.MarshalIndent(r.Env, "", "  ")
	if err != nil {
		return nil, err
	}
	type chartView struct {
		ID, Title string
		SVG       template.HTML
	}
	views := make([]chartView, len(charts))
	for i, c := range charts {
		svg := string(c.SVG)
		if i := strings.Index(svg, "<svg"); i >= 0 {
			svg = svg[i:] // drop the XML prolog: the SVG goes inline
		}
		views[i] = chartView{ID: "chart-" + c.Name, Title: c.Title, SVG: template.HTML(svg)}
	}
	// The same view as summary.md's: every section computed once.
	v := summaryOf(r)
	data := map[string]any{
		"FlashExplained": FlashExplained, "R": r, "Charts": views, "Config": string(cfg), "Env": string(env),
		"Head": v.Comparison.Head, "Rows": v.Comparison.Rows, "RHead": v.Repeats.Head, "RRows": v.Repeats.Rows,
		"Caveat": OneHostCaveat(r),
	}
	if d := v.Drift; len(d.Table.Rows) > 0 { // every verdict is of a run in the table
		data["Drift"] = d
	}
	if f := v.Flash; f != nil {
		data["FlashHead"], data["FlashRows"] = f.Table.Head, f.Table.Rows
	}
	if rec := v.Recommendation; rec != nil {
		data["Recs"], data["Weights"] = rec.Recs, rec.Weights
	}
	if f := v.Faults; f != nil {
		data["FHead"], data["FRows"], data["FDHead"], data["FDRows"] = f.Matrix.Head, f.Matrix.Rows, f.Runs.Head, f.Runs.Rows
		data["Persistence"] = f.Persistence
	}
	if IsArticlePreset(r) {
		data["Article"] = articleRows(r)
		data["ArticleDiffs"] = articleDifferences(r)
		data["ArticleSource"] = ArticleSource
	}
	var b bytes.Buffer
	if err := page.Execute(&b, data); err != nil {
		return nil, fmt.Errorf("index.html: %w", err)
	}
	return b.Bytes(), nil
}

// WriteHTML writes index.html into dir.
func WriteHTML(dir string, r *results.Results, charts []Chart) error {
	b, err := HTML(r, charts)
	if err != nil {
		return err
	}
	return results.WriteFileAtomic(filepath.Join(dir, "index.html"), b)
}

var page = template.Must(template.New("index").Funcs(template.FuncMap{
	"f1": f1, "f2": f2, "pct": pct, "label": label,
	// cell puts a folded "median (min–max)" on two lines, the range small.
	"cell": func(s string) template.HTML {
		i := strings.Index(s, " (")
		if i < 0 || !strings.HasSuffix(s, ")") {
			return template.HTML(template.HTMLEscapeString(s))
		}
		return template.HTML(template.HTMLEscapeString(s[:i]) + `<br><span class="mm">` + template.HTMLEscapeString(s[i+2:len(s)-1]) + `</span>`)
	},
	// swatch is the strategy's chart colour, for a key beside its name.
	"swatch": func(strategy string) template.CSS { return template.CSS("background:" + StyleOf(strategy).Hex()) },
	"cpu": func(run results.Run) string {
		if v := run.Harness.ServerCPUPct; v != nil {
			return f1(*v)
		}
		return "n/a"
	},
	"p":   func(run results.Run, op string) results.Percentiles { return run.LatencyMS[op] },
	"ops": func() []string { return []string{"reserve", "confirm", "cancel", "flow"} },
}).Parse(`<!DOCTYPE html>
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
td.art { color: #666; font-style: italic; }
nav.toc { background: #f7f7f7; padding: .6em 1em; line-height: 1.6; }
pre { background: #f7f7f7; padding: 1em; overflow: auto; }
</style>
</head>
<body>
<h1>stockbench results</h1>
{{if .R.Interrupted}}<p class="bad">Interrupted: the run was stopped early; the figures cover what was measured.</p>{{end}}
<p>Backend {{.R.Env.Backend}} · MySQL {{.R.Env.MySQLVersion}} · Redis {{.R.Env.RedisVersion}} · {{.R.Env.Cores}} cores ({{.R.Env.CPUModel}}) · {{.R.Env.StartedAt}}</p>
<nav class="toc"><b>Contents</b>
<a href="#comparison">Comparison</a>{{if .FlashHead}} · <a href="#flash">Flash sale</a>{{end}}{{if .RHead}} · <a href="#repeats">Repeats</a>{{end}}{{if .Article}} · <a href="#article">Beside the article</a>{{end}}{{if .Recs}} · <a href="#recommendation">Recommendation</a>{{end}}{{if .FHead}} · <a href="#faults">Fault matrix</a>{{end}}{{if .Drift}} · <a href="#drift">Drift</a>{{end}} · <a href="#charts">Charts</a> · <a href="#audit">Audit</a> · <a href="#latency">Latency</a>{{if .R.Calibration}} · <a href="#calibration">results.Calibration</a>{{end}} · <a href="#configuration">Configuration</a> · <a href="#environment">Environment</a>
<br><b>Units</b> TPS: completed reserve+confirm flows / s · latency: ms, pay delay excluded · oversell: % of confirmed units · anomalies: units or acks counted by the auditor · server CPU: % of one core</nav>

<h2 id="comparison">Comparison</h2>
<div class="wide"><table>
<tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td class="name"><span class="sw" style="{{swatch $c}}"></span>{{$c}}</td>{{else}}<td{{if eq $c "UNSAFE"}} class="bad"{{else if eq $i 1}} class="l"{{end}}>{{cell $c}}</td>{{end}}{{end}}</tr>
{{end}}</table></div>
<p>TPS: completed reserve+confirm flows per second of the measured phase; flows: their count (warm-up excluded). Flow P99: of the whole flow, pay delay excluded. The anomaly columns are the auditor's, from the stores, over the whole run; oversell %: oversold units / confirmed units. A run with any anomaly is UNSAFE. With repeats each cell is the median (min–max); every repeat is listed below. The colour beside each name is the strategy's in every chart.</p>

{{if .FlashHead}}<h2 id="flash">Flash sale</h2>
<div class="wide"><table>
<tr>{{range .FlashHead}}<th>{{.}}</th>{{end}}</tr>
{{range .FlashRows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td class="name"><span class="sw" style="{{swatch $c}}"></span>{{$c}}</td>{{else}}<td{{if eq $c "did not sell out"}} class="bad"{{else if eq $i 1}} class="l"{{end}}>{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</table></div>
<p>{{.FlashExplained}} The millisecond timelines are under Charts.</p>
{{end}}
{{if .RHead}}<h2 id="repeats">Repeats</h2>
<table>
<tr>{{range .RHead}}<th>{{.}}</th>{{end}}</tr>
{{range .RRows}}<tr>{{range $i, $c := .}}<td{{if eq $i 1}} class="l"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>{{end}}

{{with .Article}}<h2 id="article">Beside the article (--preset article)</h2>
<p>Each pair is the article's published figure (grey, italic), then the one measured in this run (median, min–max over repeats). The article's figures are quoted, not measured here. Source: {{$.ArticleSource}}.</p>
<div class="wide"><table>
<tr><th>strategy</th><th>scenario</th><th>TPS article</th><th>TPS measured</th><th>P99 ms article</th><th>P99 ms measured</th><th>oversell % article</th><th>oversell % measured</th><th>CPU % article</th><th>CPU % measured</th><th>core lines article</th><th>core lines measured</th></tr>
{{range .}}<tr><td class="name"><span class="sw" style="{{swatch .Strategy}}"></span>{{.Strategy}}</td><td class="l">{{.Scenario}}</td><td class="art">{{.TPS}}</td><td>{{cell .MTPS}}</td><td class="art">{{.P99}}</td><td>{{cell .MP99}}</td><td class="art">{{.Over}}</td><td>{{cell .MOver}}</td><td class="art">{{.CPU}}</td><td>{{.MCPU}}</td><td class="art">{{.Lines}}</td><td>{{.MLines}}</td></tr>
{{end}}</table></div>
<p>Setup differences:</p>
<ul>{{range $.ArticleDiffs}}<li>{{.}}</li>{{end}}</ul>{{end}}

{{with .Recs}}<h2 id="recommendation">Recommendation for this workload</h2>
<p>Weights: {{$.Weights}}. Scores are computed from the figures measured in this run only. Safety comes first: a strategy with any anomaly is UNSAFE and ranks after every clean one, whatever its score; within each group a strategy whose flash sale did not sell out while it turned buyers away ranks after those that sold out; the weights order strategies only within each group.</p>
<table>
<tr><th>rank</th><th>strategy</th><th>safety</th><th>score</th><th>consistency</th><th>throughput</th><th>latency</th><th>complexity</th></tr>
{{range .}}<tr><td>{{.Rank}}</td><td class="l">{{.Strategy}}</td>{{if .Unsafe}}<td class="l bad">UNSAFE</td>{{else if .Unsold}}<td class="l bad">did not sell out</td>{{else}}<td class="l">ok</td>{{end}}<td>{{f2 .Score}}</td><td>{{f2 .Consistency}}</td><td>{{f2 .Throughput}}</td><td>{{f2 .Latency}}</td><td>{{f2 .Complexity}}</td></tr>
{{end}}</table>
<ol>{{range .}}<li>{{.Reason}}</li>{{end}}</ol>{{end}}

{{if .FHead}}<h2 id="faults">Fault matrix</h2>
<p>Each cell: the worst anomaly the auditor found after settle under that fault, the most seconds of the measured phase without a completed flow, and how long after the fault ended throughput was back at half its pre-fault rate (heat map: <a href="#chart-fault-matrix">chart</a>; green clean, amber clean with an outage, red an anomaly). Redis persistence: {{.Persistence}}. Fault times are from the start of the measured phase.</p>
<table>
<tr>{{range .FHead}}<th>{{.}}</th>{{end}}</tr>
{{range .FRows}}<tr>{{range .}}<td class="l">{{.}}</td>{{end}}</tr>
{{end}}</table>
<p>Per run: errors by class inside the fault windows (start to one second after the end) and outside, units lost (leaked) and re-sold (oversold), anomalies at the end of load and after settle.</p>
<table>
<tr>{{range .FDHead}}<th>{{.}}</th>{{end}}</tr>
{{range .FDRows}}<tr>{{range .}}<td class="l">{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}

{{with .R.Curve}}<h2>Latency vs load: highest rate under P99 ≤ {{printf "%.0f" .SLOP99MS}} ms</h2>
<table>
<tr><th>strategy</th><th>highest rate held (arrivals/s)</th><th>stopped at</th><th>why</th></tr>
{{range .Strategies}}<tr><td>{{.Strategy}}</td><td>{{printf "%.0f" .MaxRate}}</td><td>{{if .StoppedAt}}{{printf "%.0f" .StoppedAt}}{{else}}—{{end}}</td><td class="l">{{.Why}}</td></tr>
{{end}}</table>{{end}}

{{with .Drift}}<h2 id="drift">Drift over the run</h2>
<p>{{.Explained}}</p>
<div class="wide"><table>
<tr>{{range .Table.Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Table.Rows}}<tr>{{range $i, $c := .}}{{if eq $i 0}}<td class="name"><span class="sw" style="{{swatch $c}}"></span>{{$c}}</td>{{else}}<td class="l">{{$c}}</td>{{end}}{{end}}</tr>
{{end}}</table></div>
{{range .Verdicts}}<p>{{.Strategy}} ({{.Label}}): {{if .FallingBehind}}<b class="bad">{{.Verdict}}</b>{{else}}{{.Verdict}}{{end}}.</p>
{{end}}{{end}}

<h2 id="charts">Charts</h2>
<p>Each strategy has one colour and marker in every chart. Bars and points are medians over repeats; whiskers span min–max. In the trade-off chart a hollow marker in a red ring means the auditor found an anomaly.</p>
{{with .Caveat}}<p class="caveat"><b>On one machine:</b> {{.}}</p>
{{end}}<div class="charts">
{{range .Charts}}<figure id="{{.ID}}">{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}</div>

<h2 id="audit">Audit (whole run, warm-up included)</h2>
<table>
<tr><th>strategy</th><th>scenario</th><th>confirmed units (whole run)</th><th>oversold units</th><th>leaked units</th><th>lost acks</th><th>cancel-ack violations</th><th>invariant violations</th><th>drift units</th></tr>
{{range .R.Runs}}<tr><td>{{.Strategy}}</td><td class="l">{{label .}}</td><td>{{.Audit.ConfirmedUnits}}</td><td{{if gt .Audit.OversoldUnits 0}} class="bad"{{end}}>{{.Audit.OversoldUnits}}</td><td>{{.Audit.LeakedUnits}}</td><td>{{.Audit.LostAcks}}</td><td>{{.Audit.CancelAckViolations}}</td><td>{{.Audit.InvariantViolations}}</td><td>{{.Audit.DriftUnits}}</td></tr>
{{range .Audit.Violations}}<tr><td></td><td class="l bad" colspan="8">{{.}}</td></tr>
{{end}}{{end}}</table>

<h2 id="latency">Latency (ms)</h2>
<table>
<tr><th>strategy</th><th>scenario</th><th>operation</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{range $run := .R.Runs}}{{range $op := ops}}{{with p $run $op}}{{if .Count}}<tr><td>{{$run.Strategy}}</td><td class="l">{{label $run}}</td><td class="l">{{$op}}</td><td>{{.Count}}</td><td>{{f2 .P50}}</td><td>{{f2 .P90}}</td><td>{{f2 .P99}}</td><td>{{f2 .P999}}</td><td>{{f2 .Max}}</td></tr>
{{end}}{{end}}{{end}}{{end}}</table>

{{with .R.Calibration}}<h2 id="calibration">results.Calibration (ops/s)</h2>
<table>
<tr><th>probe (concurrency {{.Concurrency}})</th><th>ops/s</th></tr>
<tr><td>Redis EVALSHA, reserve-shaped script, one key</td><td>{{printf "%.0f" .RedisEvalshaOps}}</td></tr>
<tr><td>MySQL conditional UPDATE, one hot row</td><td>{{printf "%.0f" .MySQLHotUpdateOps}}</td></tr>
<tr><td>MySQL SELECT … FOR UPDATE + UPDATE txn, one hot row</td><td>{{printf "%.0f" .MySQLHotTxnOps}}</td></tr>
</table>{{end}}

<h2 id="configuration">Configuration</h2>
<pre>{{.Config}}</pre>
<h2 id="environment">Environment</h2>
<pre>{{.Env}}</pre>
</body>
</html>
`))
