package reports

import (
	"fmt"
	"strings"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
)

// ArticlePreset is the name `stockbench run --preset article` records in
// results.json (config.preset); reports of such a run show the article's
// published figures beside the measured ones.
const ArticlePreset = "article"

// ArticleSource names where the reference figures below come from.
const ArticleSource = "the seed article on atomic reserve (预占) and confirm (实占) of e-commerce stock, " +
	"「核心结论：原子化不是技术选项，而是库存系统的生存底线」: its comparison table (4C8G cloud server, MySQL 8.0, " +
	"Redis 6.2, 100 units of initial stock, 30 s of concurrent requests) and its no-atomicity experiment " +
	"(100 units, 120 concurrent orders, 200–500 ms random wait between reserve and confirm)"

// ArticleFigure is one row the article published. These are quoted
// reference data, never measured by this tool: a figure the article does not
// give is absent (its Has… flag false).
type ArticleFigure struct {
	// Strategy is this tool's strategy that implements the article's scheme.
	Strategy string
	// Scheme is the article's own name for it.
	Scheme string
	// Scenario is this tool's scenario that matches the article's experiment.
	Scenario string
	// TPS is the article's average TPS: requests that completed reserve +
	// confirm per second.
	TPS float64
	// P99MS is the article's P99 latency in milliseconds.
	P99MS float64
	// OversellPct is the article's oversell rate in percent.
	OversellPct float64
	// CPUPct is the article's average CPU use (of its 4-core machine).
	CPUPct float64
	// CoreLines is the article's "~N" lines of core logic.
	CoreLines int
	// HasLoad is true when the article gives TPS, P99, CPU and lines.
	HasLoad bool
}

// ArticleFigures are the article's published figures (see ArticleSource):
// the three schemes of its comparison table, and the oversell it measured
// with no atomicity at all (which this tool's naive strategy reproduces).
// Quoted, not measured; keep them here and nowhere else.
var ArticleFigures = []ArticleFigure{
	{Strategy: "rowlock", Scheme: "数据库行锁+本地事务 (row lock + local transaction)", Scenario: "sustained",
		TPS: 620, P99MS: 180, OversellPct: 0, CPUPct: 92, CoreLines: 80, HasLoad: true},
	{Strategy: "lua-tcc", Scheme: "Redis Lua+TCC补偿 (Redis Lua + TCC compensation)", Scenario: "sustained",
		TPS: 4580, P99MS: 8, OversellPct: 0.001, CPUPct: 65, CoreLines: 350, HasLoad: true},
	{Strategy: "outbox", Scheme: "Redis+本地消息表最终一致 (Redis + local message table, eventually consistent)", Scenario: "sustained",
		TPS: 6120, P99MS: 6, OversellPct: 0.1, CPUPct: 58, CoreLines: 600, HasLoad: true},
	{Strategy: "naive", Scheme: "无原子化保护 (no atomicity)", Scenario: "flash", OversellPct: 13.5},
}

// articleFiguresFor returns the article's figures for one of this tool's
// scenarios.
func articleFiguresFor(scenario string) []ArticleFigure {
	var out []ArticleFigure
	for _, f := range ArticleFigures {
		if f.Scenario == scenario {
			out = append(out, f)
		}
	}
	return out
}

// isArticlePreset reports whether r was run with --preset article.
func isArticlePreset(r *results.Results) bool {
	return r.Config.Preset == ArticlePreset
}

// articleRow is one line of the side-by-side table: the article's figure
// and the measured one, as text.
type articleRow struct {
	Strategy, Scenario, Scheme                   string
	TPS, MTPS, P99, MP99, Over, MOver, CPU, MCPU string
	Lines, MLines                                string
}

// articleRows pairs each of the article's figures with the row of r that
// ran the same strategy on the matching scenario (median over repeats).
func articleRows(a *analysis.Analysis) []articleRow {
	var out []articleRow
	rows := a.Rows
	for _, f := range ArticleFigures {
		ar := articleRow{Strategy: f.Strategy, Scenario: f.Scenario, Scheme: f.Scheme,
			TPS: "–", P99: "–", CPU: "–", Lines: "–", Over: trimFloat(f.OversellPct),
			MTPS: "not run", MP99: "not run", MOver: "not run", MCPU: "not run", MLines: "not run"}
		if f.HasLoad {
			ar.TPS, ar.P99 = trimFloat(f.TPS), trimFloat(f.P99MS)
			ar.CPU, ar.Lines = trimFloat(f.CPUPct)+" (of 4 cores)", fmt.Sprintf("~%d", f.CoreLines)
		}
		for _, row := range rows {
			if row.Strategy != f.Strategy || row.Scenario != f.Scenario || row.Value != "" {
				continue
			}
			runs := row.Runs
			ar.MTPS = fold(runs, func(r results.Run) float64 { return r.TPS }, f1)
			ar.MP99 = fold(runs, func(r results.Run) float64 { return r.LatencyMS["flow"].P99 }, f2)
			ar.MOver = fold(runs, func(r results.Run) float64 { return r.Audit.OversellRate }, pct)
			ar.MCPU = "n/a"
			if row.HasCPU {
				ar.MCPU = fold(runs, results.ServerCPU, f1) + " (of one core)"
			}
			ar.MLines = fmt.Sprint(row.CoreLines)
		}
		out = append(out, ar)
	}
	return out
}

func trimFloat(x float64) string { return strings.TrimSuffix(fmt.Sprintf("%g", x), ".0") }

// articleDifferences lists how this run's setup differs from the article's,
// from what results.json recorded.
func articleDifferences(r *results.Results) []string {
	e := r.Env
	dur, buyers := r.Config.Duration, fmt.Sprint(r.Config.Buyers)
	network := "Network: the article's service reached MySQL and Redis over its cloud network (not stated; the preset models one availability zone, --rtt same-zone); this run went over loopback, where a round trip costs tens of microseconds, so row locks are held for less time than in the article's setting."
	if r.Config.RTT != "" {
		network = "Network: the article's service reached MySQL and Redis over its cloud network (not stated; the preset models one availability zone); this run modelled " + strings.TrimSuffix(strings.TrimPrefix(networkLine(r), "Network: "), ".") + "."
	}
	return []string{
		network,
		fmt.Sprintf("Hardware: the article used a 4-core, 8 GB cloud server; this run had %d cores (%s), shared by the servers and the load generator.", e.Cores, e.CPUModel),
		fmt.Sprintf("Database: the article ran MySQL 8.0; this run ran %s (backend %s, innodb_flush_log_at_trx_commit=%s, sync_binlog=%s).", e.MySQLVersion, e.Backend, e.InnodbFlushLogAtTrxCommit, e.SyncBinlog),
		fmt.Sprintf("Redis: the article ran Redis 6.2; this run ran Redis %s (appendonly %s).", e.RedisVersion, e.RedisAppendOnly),
		fmt.Sprintf("Load: the article's table is 30 s of concurrent requests on 100 units of initial stock (its concurrency is not stated); here the sustained scenario measured %s per strategy after a warm-up, %s closed-loop buyers, one SKU of 100 units refilled when sold out; --duration 30s gives the article's 30 s at the cost of a longer run.", dur, buyers),
		"Oversell: the article compared Redis and MySQL stock by hand after the test; here the auditor counts confirmed units beyond the stock put in (oversold / confirmed), from the stores, and also reports leaked and drifted units and lost acks, which the article does not.",
		"Naive: the article's 13.5 % is the average of its no-atomicity experiment (100 units, 120 orders, 200–500 ms pay wait); here it is one flash run of the naive strategy with the same numbers (or the median of the repeats).",
		"CPU: the article gives average CPU use of its machine; here server CPU % is MySQL + Redis CPU over the measured phase in percent of one core.",
		"Code: the article's lines are its own implementations' (~); here core lines are counted from this repository's strategy packages.",
	}
}

// articleView is summary.md's section beside the article.
type articleView struct {
	Source      string
	Table       table
	Differences []string
}

// articleOf is the side-by-side section of r; nil when r is not an
// article preset run.
func articleOf(a *analysis.Analysis) *articleView {
	r := a.Results
	if !isArticlePreset(r) {
		return nil
	}
	t := table{Head: []string{"strategy", "scenario", "TPS article", "TPS measured", "P99 ms article", "P99 ms measured", "oversell % article", "oversell % measured",
		"CPU % article", "CPU % measured", "core lines article", "core lines measured"}, Align: "llrrrrrrrrrr"}
	for _, ar := range articleRows(a) {
		t.Rows = append(t.Rows, []string{ar.Strategy, ar.Scenario, ar.TPS, ar.MTPS, ar.P99, ar.MP99, ar.Over, ar.MOver, ar.CPU, ar.MCPU, ar.Lines, ar.MLines})
	}
	return &articleView{ArticleSource, t, articleDifferences(r)}
}
