package main

import (
	"sort"
	"strings"
)

// commandHelp is what `stockbench COMMAND -h` prints above the flags: the
// arguments the command takes, what it does, and an example.
var commandHelp = map[string]struct{ args, about, example string }{
	"run": {"[flags]",
		"Runs each scenario against each strategy on real MySQL/MariaDB and Redis, audits the stores,\nand writes results.json, summary.md, CSV, charts and index.html into --out.",
		"stockbench run --strategies naive,rowlock --scenario flash --stock 100 --buyers 120 --out reports/flash\n  stockbench run --scenario sustained --rate 2000 --buyers 256 --duration 30s --repeat 3\n  stockbench run --preset article   # the article's experiment, its published figures beside the measured ones\n  stockbench run --backend external --redis-addr 127.0.0.1:6379 --mysql-dsn 'app:pw@tcp(10.0.0.1:3306)/bench' --mysql-dsn 'app:pw@tcp(10.0.0.2:3306)/bench'   # an external MySQL cluster, one DSN per node\n  stockbench run --procs 2 --generators docker --strategies lua-tcc --scenario sustained --out reports/p2   # two generator containers, merged, audited once"},
	"sweep": {"--param NAME=V1,V2,… [run flags]",
		"Runs the same scenarios once per value of one run flag, on one set of servers, into one\nresults.json with sweep charts. Takes every run flag but the generator flags (--procs, --generators,\n--shard, --no-reset, --start-barrier).",
		"stockbench sweep --param buyers=50,100,200,400 --scenario sustained --duration 10s --out reports/sweep\n  stockbench sweep --param skus=1,10,100 --redis-cluster 3 --scenario sustained --strategies lua-tcc,outbox   # a cluster on one machine: mechanics, not scaling"},
	"curve": {"[--rates R1,R2,…] [--slo p99=50ms] [run flags]",
		"Drives each strategy open loop (sustained scenario) at increasing arrival rates until its flow P99\npasses the SLO or errors appear (or arrivals are dropped), and reports per strategy the highest rate\nthat held, with a chart of P99 against offered load. Steps default to --duration 5s --warmup 1s.\nTakes every run flag but the generator flags (--procs, --generators, --shard, --no-reset, --start-barrier).",
		"stockbench curve --strategies rowlock,batched,lua-tcc --rates 200,400,800,1600,3200 --slo p99=50ms --out reports/curve"},
	"faults": {"[--only COLUMNS] [run flags]",
		"Runs every strategy under each fault of the standard matrix — redis-pause@2s+2s, redis-restart@2s,\nredis-lose@1s+1s, mysql-restart@2s, latency (20ms±10ms on MySQL and Redis, 2s+2s), app-crash@2s,\nlocal-fail@2s+2s (outbox-local's local table) — a short sustained run each, and writes the fault matrix: per strategy and fault the worst anomaly and the outage, as a\ntable and a heat map. Fault times are from the start of the measured phase. Takes every run flag\nbut --fault and the generator flags (--procs, --generators, --shard, --no-reset, --start-barrier).\nIts defaults differ from run's: " + faultDefaultsText() + ".",
		"stockbench faults --backend local --seed 2 --redis-persistence everysec --out reports/faults-s2"},
	"calibrate": {"[flags]",
		"Measures the raw ceilings of the stores on one hot item: a bare EVALSHA, a conditional UPDATE,\na SELECT … FOR UPDATE transaction. Progress goes to stderr, the figures to stdout.",
		"stockbench calibrate --backend local --concurrency 128 --duration 5s --json"},
	"report": {"DIR",
		"Re-renders summary.md, summary.csv, series.csv, charts and index.html from DIR/results.json\nand prints the headline table.",
		"stockbench report reports/flash"},
	"compare": {"OLD NEW [flags]  (results.json files, or report directories holding one)",
		"The CI gate: prints OLD and NEW side by side and exits 1 when NEW regressed: any anomaly class\n(oversold, leaked or phantom units, lost or contradicted acks, refused-after-reserve, invariant\nviolations, drift, orphan or stale reservations) higher than in OLD, a\nstrategy or scenario of OLD missing from NEW, an unproven row of NEW, or a TPS drop / P99 rise\npast the thresholds that is also beyond the runs' own noise (the spread of the repeats, the runs'\nper-second series; a run under 3 s without --repeat is not gated on speed) and not explained by\nthe CPU the runs got (their flows per CPU second held). An anomaly count moving in a strategy\nUNSAFE in both files is a note. Exit 0 otherwise, 2 on bad input.",
		"stockbench compare base/results.json new/results.json --max-tps-drop 10% --max-p99-rise 20%"},
	"project": {"RESULTS [--deploy SPEC]  (a results.json file, or a report directory holding one)",
		"Carries each run's measured cost per flow (runs[].cost) to a stated deployment and prints its\nprojected throughput, the tier that binds it and every tier's capacity: CPU per flow over the tier's\ncores (Redis: one thread), a hot row held one flow at a time, the buyers over one flow's round\ntrips and CPU. The null probe's runs give the generator's cost. A model, not yet validated.",
		"stockbench project reports/latest --deploy 'mysql=16,redis=1,service=8x4,rtt=same-zone'"},
	"prepare": {"--backend external --scenario S [run flags]",
		"What run --procs N does before it starts its generators, as a step of its own: guards the external\nstores (run lock, foreign tables, pool), resets the schema and Redis and loads the scenario's stock.\nThen start N generators with the same flags plus --shard I/N --no-reset --start-barrier KEY (each\nloads what its strategy keeps in Redis, never over live stock), merge their results.json with\nstockbench merge and grade the stores with stockbench audit. Takes run's flags; one scenario.",
		"stockbench prepare --backend external --scenario flash --stock 100   # servers: STOCKBENCH_MYSQL_DSN, STOCKBENCH_REDIS_URL\n  stockbench run --backend external --scenario flash --stock 100 --strategies lua-tcc --shard 0/2 --no-reset --start-barrier b1 --out gen-0 &\n  stockbench run --backend external --scenario flash --stock 100 --strategies lua-tcc --shard 1/2 --no-reset --start-barrier b1 --out gen-1\n  stockbench merge reports/merged gen-0 gen-1 && stockbench audit --acks reports/merged/acks.json --redis-reservations"},
	"merge": {"OUT DIR…",
		"Merges the results.json of several generators of the same runs (run --shard I/N, one DIR each)\ninto OUT/results.json and renders it: histograms merged exactly and percentiles recomputed, counts\nsummed, TPS over the union of the measured windows, series aligned by wall-clock second. When each\nfile holds one run, the acks the generators' clients got go to OUT/acks.json: grade the stores\nafterwards with stockbench audit --acks OUT/acks.json (a shard's file holds no audit). run --procs N\ndoes all of it; stockbench prepare readies the stores for generators started by hand.",
		"stockbench merge reports/merged gen-0 gen-1"},
	"audit": {"--mysql-dsn DSN [--mysql-dsn DSN…] [--redis-addr HOST:PORT] [flags]",
		"The reconciliation job (对账): grades any MySQL (and Redis) in stockbench's schema with the\nauditor of run — oversold, phantom and leaked units, broken invariants, Redis drift field by field,\norphan and stale reservations — prints every figure, and exits 1 on an anomaly (0 clean, 2 bad input,\n3 the audit could not complete). With one --mysql-dsn per node of a cluster, the first is graded and a node that\ndisagrees with it is an anomaly. --every D runs it periodically, one JSON line per pass; --alert-over sets\nthe deviation (Redis vs the MySQL rows) a pass may show before it alerts, per SKU and in total.",
		"stockbench audit --mysql-dsn 'user:pw@tcp(127.0.0.1:3306)/shop' --redis-addr 127.0.0.1:6379 --ledger FLASH-1=100\n  stockbench audit --mysql-dsn \"$DSN\" --redis-addr 127.0.0.1:6379 --every 1h --alert-over sku=50,total=2000"},
	"serve": {"--strategy NAME [--listen 127.0.0.1:PORT] [--state-dir DIR] [--load SKU=N,…] [server flags]",
		"Serves one instance of one strategy behind the order API (docs/api.md): POST /v1/reserve, /v1/confirm,\n/v1/cancel, /v1/restock, GET /v1/health — HTTP/1.1 keep-alive, JSON bodies, idempotent by order id. Its\nbackground loops (expiry, relay, reconciler) run inside it and its own state (outbox-local's message table)\nlives in --state-dir, which a restart resumes. The stores are the run's (--backend, --mysql-dsn,\n--redis-addr …); --load resets them and loads stock first. Prints \"serving NAME on http://HOST:PORT\" once\nready; SIGTERM or Ctrl-C drains it and exits 0. Loopback only unless --allow-remote.",
		"stockbench serve --backend local --strategy lua-tcc --load FLASH-1=100 --listen 127.0.0.1:8080 --state-dir /tmp/svc-0\n  stockbench serve --backend external --strategy outbox-local --listen 127.0.0.1:0 --state-dir /var/lib/stockbench/svc-1   # STOCKBENCH_MYSQL_DSN, STOCKBENCH_REDIS_ADDR"},
	"down": {"",
		"Removes what killed runs left behind, one line each: stockbench containers whose run is gone, and the\ntemporary directories (stockbench-{mysql,redis,docker,acks,local,outbox-local}-*) of processes that\nare gone. A live run's containers and directories are kept. Takes no arguments.",
		"stockbench down"},
	"version": {"",
		"Prints the tool's version and revision. Takes no arguments.",
		"stockbench version"},
}

// faultDefaultsText lists the faults command's own defaults (faultDefaults)
// as flags, in name order.
func faultDefaultsText() string {
	names := make([]string, 0, len(faultDefaults))
	for k := range faultDefaults {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		names[i] = "--" + k + " " + faultDefaults[k]
	}
	return strings.Join(names, " ")
}
