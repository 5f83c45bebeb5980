package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	for i := range dsns {
		dsns[i] = servers.WithDriverParams(dsns[i])
	}
	// The auditor reads the first node; on a cluster every other node is
	// compared with it, and every node — the first too — is read after it
	// applied what the others committed.
	ep := servers.Endpoints{MySQLDSN: dsns[0], RedisAddr: addr, RedisURL: rurl}
	if rurl != "" {
		// What is printed: the URL without its password.
		addr = servers.RedactURL(rurl)
	}
	if len(dsns) > 1 {
		for i, d := range dsns {
			if err := pingOne(ctx, d); err != nil {
				return fail(exitUsage, fmt.Errorf("mysql node %d %s does not answer: %w", i+1, servers.RedactDSN(d), err))
			}
		}
		mode, err := servers.ResolveCausalReads(ctx, dsns, causal)
		if err != nil {
			return fail(exitUsage, err)
		}
		if ep.MySQLDSN, err = servers.WithCausalReads(dsns[0], mode); err != nil {
			return fail(exitUsage, err)
		}
		ep.MySQLCluster, ep.MySQLCausalReads, ep.MySQLCausalAuto = dsns, mode, causal == servers.CausalAuto
	}
	conns, err := servers.Open(ep, 4)
	if err != nil {
		return fail(exitUsage, err)
	}
	defer conns.Close()
	a.DB = conns.DB
	if addr != "" {
		a.Redis = conns.Redis
	}
	if err := conns.DB.PingContext(ctx); err != nil {
		return fail(exitUsage, fmt.Errorf("mysql %s does not answer: %w", ep.Redacted(), err))
	}
	if a.Redis != nil {
		if err := conns.Redis.Ping(ctx).Err(); err != nil {
			return fail(exitUsage, fmt.Errorf("redis %s does not answer: %w", addr, err))
		}
	}
	res, err := a.Audit(ctx, acks)
	if err != nil {
		return fail(exitFailed, err)
	}
	// A replicated cluster's nodes must all hold what the first holds.
	diffs, err := conns.NodeDisagreement(ctx)
	if err != nil {
		return fail(exitFailed, err)
	}
	res.AddViolations(diffs)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return fail(exitFailed, err)
		}
	} else {
		printAudit(stdout, ep.MySQLDescription(), addr, res)
	}
	if res.Anomalies > 0 {
		return exitFailed
	}
	return exitOK
}

// auditFlags are the flags of stockbench audit.
type auditFlags struct {
	dsns                                 []string
	addr, rurl, causal, ledger, acksFile string
	redisRes, asJSON                     bool
	grace                                time.Duration
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
	fmt.Fprintf(w, "audit of %s: %d SKUs, %d confirmed units\n", where, len(a.SKUs), a.ConfirmedUnits)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  anomalies\t%d\n", a.Anomalies)
	for _, c := range audit.Classes {
		fmt.Fprintf(tw, "  %s\t%d\n", c.Key, c.Of(a))
	}
	fmt.Fprintf(tw, "  missing_redis_stock\t%d\n", a.MissingRedisStock)
	tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
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

// pingOne checks that the MySQL server of dsn answers.
func pingOne(ctx context.Context, dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}
