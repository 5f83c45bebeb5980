package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
)

// cmdAudit is the periodic reconciliation job (对账) as a command: it grades
// any MySQL (and Redis) in the stockbench schema with the run's auditor,
// prints the verdict, and exits 1 when it finds an anomaly.
func cmdAudit(ctx context.Context, args []string, stdout io.Writer, fail func(int, error) int) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	var af auditFlags
	af.register(fs)
	if code, done := parseFlags(fs, args, stdout, fail); done {
		return code
	}
	dsns, addr, rurl, causal, ledger, acksFile := af.dsns, af.addr, af.rurl, af.causal, af.ledger, af.acksFile
	redisRes, asJSON, grace := af.redisRes, af.asJSON, af.grace
	switch {
	case af.every < 0 || af.passes < 0:
		return fail(exitUsage, errors.New("--every and --passes must not be negative"))
	case af.passes > 0 && af.every == 0:
		return fail(exitUsage, errors.New("--passes needs --every"))
	}
	if len(dsns) == 0 {
		env := servers.OptionsFromEnv(servers.Options{})
		if dsns = env.MySQLDSNs; len(dsns) == 0 && env.MySQLDSN != "" {
			dsns = []string{env.MySQLDSN}
		}
	}
	if addr == "" && rurl == "" {
		addr, rurl = os.Getenv("STOCKBENCH_REDIS_ADDR"), os.Getenv("STOCKBENCH_REDIS_URL")
	}
	if addr != "" && rurl != "" {
		return fail(exitUsage, errors.New("--redis-addr or --redis-url, not both"))
	}
	if rurl != "" {
		if _, err := servers.ParseRedisURL(rurl); err != nil {
			return fail(exitUsage, err)
		}
	}
	if len(dsns) == 0 {
		return fail(exitUsage, errors.New("audit needs --mysql-dsn (or STOCKBENCH_MYSQL_DSN)"))
	}
	if _, err := servers.CheckCausal(causal); err != nil {
		return fail(exitUsage, err)
	}
	if redisRes && addr == "" && rurl == "" {
		return fail(exitUsage, errors.New("--redis-reservations needs --redis-addr or --redis-url"))
	}
	a := audit.Auditor{RedisReservations: redisRes}
	if ledger != "" {
		l, err := parseLedger(ledger)
		if err != nil {
			return fail(exitUsage, err)
		}
		a.Ledger = l
	}
	var acks []inventory.Ack
	if acksFile != "" {
		b, err := os.ReadFile(acksFile)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("--acks: %w", err))
		}
		if err := json.Unmarshal(b, &acks); err != nil {
			return fail(exitUsage, fmt.Errorf("--acks %s: %w", acksFile, err))
		}
	}
	if grace >= 0 {
		a.StaleBefore = time.Now().Add(-grace)
	}
	// The stores are found as a run on external servers finds them:
	// every node answers, the cluster's causal reads are resolved. The
	// auditor reads the first node; on a cluster every other node is
	// compared with it, and every node — the first too — is read after it
	// applied what the others committed.
	ext := &servers.External{DSN: dsns[0], Addr: addr, URL: rurl, CausalReads: causal, NoSpread: true}
	if len(dsns) > 1 {
		ext.Nodes = dsns
	}
	ep, err := ext.Start(ctx)
	if err != nil {
		return fail(exitUsage, err)
	}
	if len(dsns) > 1 {
		if ep.MySQLDSN, err = servers.WithCausalReads(ep.MySQLDSN, ep.MySQLCausalReads); err != nil {
			return fail(exitUsage, err)
		}
	}
	if rurl != "" {
		// What is printed: the URL without its password.
		addr = servers.RedactURL(rurl)
	}
	conns, err := servers.Open(ep, 4)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer conns.Close()
	a.DB = conns.DB
	if a.Ledger != nil {
		// A ledger naming a SKU the stores do not hold is a wrong database
		// or a wrong flag, not hundreds of invariant violations.
		var skus []string
		for sku := range a.Ledger {
			skus = append(skus, sku)
		}
		slices.Sort(skus)
		missing, held, err := missingSKUs(ctx, conns.DB, skus)
		if err != nil {
			return fail(exitUsage, fmt.Errorf("--ledger: %w", err))
		}
		if len(missing) > 0 {
			return fail(exitUsage, fmt.Errorf("--ledger: SKU %s is not in this database's inventory (it holds %d SKUs): name the SKUs of the run you audit", strings.Join(missing, ", "), held))
		}
	}
	if addr != "" {
		a.Redis = conns.Redis
	}
	pass := func(ctx context.Context) (audit.Audit, error) {
		res, err := a.Audit(ctx, acks)
		if err != nil {
			return res, err
		}
		// A replicated cluster's nodes must all hold what the first holds.
		diffs, err := conns.NodeDisagreement(ctx)
		if err != nil {
			return res, err
		}
		res.AddViolations(diffs)
		return res, nil
	}
	if af.every > 0 {
		return periodic(ctx, pass, af, stdout)
	}
	res, err := pass(ctx)
	if err != nil {
		return fail(exitIncomplete, err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fail(exitFailed, err)
		}
	} else {
		printAudit(stdout, ep.MySQLDescription(), addr, res)
	}
	if af.alert.set {
		if reason := af.alert.check(res); reason != "" {
			fmt.Fprintln(stdout, "ALERT: "+reason)
			return exitFailed
		}
		return exitOK
	}
	if res.Anomalies > 0 {
		return exitFailed
	}
	return exitOK
}

// alertOver is --alert-over: deviation thresholds per SKU and in total.
type alertOver struct {
	set        bool
	sku, total int64
}

// parseAlertOver reads N (per SKU and in total) or sku=N,total=M (either
// may be left out: no threshold of that kind).
func parseAlertOver(v string) (alertOver, error) {
	a := alertOver{set: true, sku: -1, total: -1}
	bad := fmt.Errorf("--alert-over %q: want N, or sku=N,total=M (units of deviation, not negative)", v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return a, bad
		}
		a.sku, a.total = n, n
		return a, nil
	}
	for _, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if !ok || err != nil || n < 0 {
			return a, bad
		}
		switch k {
		case "sku":
			a.sku = n
		case "total":
			a.total = n
		default:
			return a, bad
		}
	}
	return a, nil
}

// check says why res alerts ("" when it does not): a SKU's deviation or
// the total deviation past its threshold, or any oversold unit (never an
// in-flight state: units confirmed beyond the stock put in). The other
// anomaly classes are reported but do not alert under --alert-over: on
// live stores an eventually consistent strategy shows some of them in
// flight.
func (a alertOver) check(res audit.Audit) string {
	var why []string
	if a.sku >= 0 && res.MaxSKUDeviation > a.sku {
		why = append(why, fmt.Sprintf("SKU %s deviates by %d units (over %d)", res.MaxDeviationSKU, res.MaxSKUDeviation, a.sku))
	}
	if a.total >= 0 && res.DeviationUnits > a.total {
		why = append(why, fmt.Sprintf("total deviation %d units (over %d)", res.DeviationUnits, a.total))
	}
	if res.OversoldUnits > 0 {
		why = append(why, fmt.Sprintf("%d oversold units", res.OversoldUnits))
	}
	return strings.Join(why, "; ")
}

// passLine is one pass of a periodic audit, as one JSON line.
type passLine struct {
	Time            string  `json:"time"`
	Pass            int     `json:"pass"`
	Sec             float64 `json:"sec"`
	SKUs            int64   `json:"skus"`
	DeviationUnits  int64   `json:"deviation_units"`
	MaxSKUDeviation int64   `json:"max_sku_deviation"`
	MaxDeviationSKU string  `json:"max_deviation_sku,omitempty"`
	OversoldUnits   int64   `json:"oversold_units"`
	DriftUnits      int64   `json:"drift_units"`
	Anomalies       int64   `json:"anomalies"`
	Alert           bool    `json:"alert"`
	Reason          string  `json:"reason,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// periodic runs pass every af.every (af.passes times, or until ctx ends)
// and prints one JSON line per pass. A pass alerts when af.alert says so
// (without --alert-over: on any anomaly). Exit: 1 if a pass alerted, else
// 3 if a pass could not complete, else 0.
func periodic(ctx context.Context, pass func(context.Context) (audit.Audit, error), af auditFlags, stdout io.Writer) int {
	enc := json.NewEncoder(stdout)
	alerted, failed := false, false
	tick := time.NewTicker(af.every)
	defer tick.Stop()
	for n := 1; af.passes == 0 || n <= af.passes; n++ {
		if n > 1 {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		res, err := pass(ctx)
		line := passLine{Time: t0.UTC().Format(time.RFC3339Nano), Pass: n, Sec: time.Since(t0).Seconds()}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			line.Error, failed = err.Error(), true
		} else {
			line.SKUs, line.DeviationUnits, line.MaxSKUDeviation, line.MaxDeviationSKU = res.SKUsAudited, res.DeviationUnits, res.MaxSKUDeviation, res.MaxDeviationSKU
			line.OversoldUnits, line.DriftUnits, line.Anomalies = res.OversoldUnits, res.DriftUnits, res.Anomalies
			if af.alert.set {
				line.Reason = af.alert.check(res)
			} else if res.Anomalies > 0 {
				line.Reason = fmt.Sprintf("%d anomalies", res.Anomalies)
			}
			line.Alert = line.Reason != ""
			alerted = alerted || line.Alert
		}
		if err := enc.Encode(line); err != nil {
			return exitIncomplete
		}
	}
	switch {
	case alerted:
		return exitFailed
	case failed:
		return exitIncomplete
	}
	return exitOK
}

// auditFlags are the flags of stockbench audit.
type auditFlags struct {
	dsns                                 []string
	addr, rurl, causal, ledger, acksFile string
	redisRes, asJSON                     bool
	grace                                time.Duration
	every                                time.Duration
	passes                               int
	alert                                alertOver
}

func (a *auditFlags) register(fs *flag.FlagSet) {
	fs.Func("mysql-dsn", "MySQL DSN of the database to audit (or STOCKBENCH_MYSQL_DSN); repeat it, one DSN per node, for a cluster (or STOCKBENCH_MYSQL_DSNS, one per line): the first is audited and every other node must hold the same", func(v string) error {
		a.dsns = append(a.dsns, v)
		return nil
	})
	fs.StringVar(&a.causal, "mysql-causal-reads", servers.CausalAuto, "on a cluster, how each node is read after it applied what the others committed: auto | wsrep | group-replication | none")
	fs.StringVar(&a.addr, "redis-addr", "", "Redis host:port holding the stock hashes (or STOCKBENCH_REDIS_ADDR); none: MySQL only")
	fs.StringVar(&a.rurl, "redis-url", "", "Redis URL instead of --redis-addr (or STOCKBENCH_REDIS_URL): redis[s]://[user:password@]host:port[/db], for a Redis with a password")
	fs.BoolVar(&a.redisRes, "redis-reservations", false, "reservations live only in Redis until decided (lua-tcc); default: MySQL holds an order for each")
	fs.StringVar(&a.ledger, "ledger", "", "initial stock per SKU, SKU=N,…; the restock journal rows that --acks names as issued restocks are added (default: the MySQL total is the ledger)")
	fs.StringVar(&a.acksFile, "acks", "", "JSON file of acknowledgements clients got: [{\"order_id\":…,\"sku\":…,\"state\":\"reserved|confirmed|cancelled|refused\"}]")
	fs.DurationVar(&a.grace, "stale-grace", time.Minute, "a live Redis reservation this long past its deadline is stale (negative: no check)")
	fs.BoolVar(&a.asJSON, "json", false, "print the audit as JSON")
	fs.DurationVar(&a.every, "every", 0, "run periodically, one pass every D, printing one JSON line per pass (0: once)")
	fs.IntVar(&a.passes, "passes", 0, "with --every: stop after N passes (0: until interrupted)")
	fs.Func("alert-over", "alert only when Redis deviates from the MySQL rows by more than N units in a SKU or in total (N, or sku=N,total=M), or a unit is oversold: an eventually consistent strategy's in-flight drift stays under it", func(v string) error {
		a2, err := parseAlertOver(v)
		a.alert = a2
		return err
	})
}

// parseLedger reads SKU=N,….
func parseLedger(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || k == "" || err != nil || n < 0 {
			return nil, fmt.Errorf("--ledger: %q is not SKU=N", part)
		}
		out[k] = n
	}
	return out, nil
}

// printAudit writes the verdict: every anomaly figure by its results.json
// name, a line per SKU, then the violations found.
func printAudit(w io.Writer, mysql, redisAddr string, a audit.Audit) {
	where := mysql
	if redisAddr != "" {
		where += ", redis " + redisAddr
	}
	fmt.Fprintf(w, "audit of %s: %d SKUs, %d confirmed units\n", where, a.SKUsAudited, a.ConfirmedUnits)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  anomalies\t%d\n", a.Anomalies)
	for _, c := range audit.Classes {
		fmt.Fprintf(tw, "  %s\t%d\n", c.Key, c.Of(a))
	}
	fmt.Fprintf(tw, "  missing_redis_stock\t%d\n", a.MissingRedisStock)
	tw.Flush()
	if a.SKUsAudited > int64(len(a.SKUs)) {
		// A large catalog: the audit kept the anomalous SKUs only.
		if a.SKUsWithAnomaly > 0 {
			fmt.Fprintf(w, "%d SKUs with an anomaly; the first %d of them:\n", a.SKUsWithAnomaly, len(a.SKUs))
		} else {
			fmt.Fprintln(w, "no SKU with an anomaly")
		}
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(a.SKUs) == 0 {
		tw = tabwriter.NewWriter(io.Discard, 0, 0, 2, ' ', 0)
	}
	fmt.Fprintln(tw, "sku\tledger\ttotal\tavailable\toccupied\tsold\tconfirmed\treserved\tredis a/o/s\tdrift\t")
	for _, s := range a.SKUs {
		r := "-"
		if s.Redis != nil {
			r = fmt.Sprintf("%d/%d/%d", s.Redis.Available, s.Redis.Occupied, s.Redis.Sold)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", s.SKU, s.Ledger, s.Total, s.Available, s.Occupied, s.Sold,
			s.ConfirmedUnits, s.ReservedUnits, r, s.DriftUnits)
	}
	tw.Flush()
	if len(a.Violations) > 0 {
		fmt.Fprintln(w, "found:")
		for _, v := range a.Violations {
			fmt.Fprintln(w, "- "+v)
		}
	}
	if a.Anomalies == 0 {
		fmt.Fprintln(w, "no anomaly")
	}
}
