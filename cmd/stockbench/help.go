package main

// commandHelp is what `stockbench COMMAND -h` prints above the flags: the
// arguments the command takes, what it does, and an example.
var commandHelp = map[string]struct{ args, about, example string }{
	"run": {"[flags]",
		"Runs each scenario against each strategy on real MySQL/MariaDB and Redis, audits the stores,\nand writes results.json, summary.md, CSV, charts and index.html into --out.",
		"stockbench run --strategies naive,rowlock --scenario flash --stock 100 --buyers 120 --out reports/flash\n  stockbench run --scenario sustained --rate 2000 --buyers 256 --duration 30s --repeat 3\n  stockbench run --preset article   # the article's experiment, its published figures beside the measured ones"},
	"sweep": {"--param NAME=V1,V2,… [run flags]",
		"Runs the same scenarios once per value of one run flag, on one set of servers, into one\nresults.json with sweep charts. Takes every run flag.",
		"stockbench sweep --param buyers=50,100,200,400 --scenario sustained --duration 10s --out reports/sweep"},
	"curve": {"[--rates R1,R2,…] [--slo p99=50ms] [run flags]",
		"Drives each strategy open loop (sustained scenario) at increasing arrival rates until its flow P99\npasses the SLO or errors appear (or arrivals are dropped), and reports per strategy the highest rate\nthat held, with a chart of P99 against offered load. Steps default to --duration 5s --warmup 1s.",
		"stockbench curve --strategies rowlock,batched,lua-tcc --rates 200,400,800,1600,3200 --slo p99=50ms --out reports/curve"},
	"calibrate": {"[flags]",
		"Measures the raw ceilings of the stores on one hot item: a bare EVALSHA, a conditional UPDATE,\na SELECT … FOR UPDATE transaction. Progress goes to stderr, the figures to stdout.",
		"stockbench calibrate --backend local --concurrency 128 --duration 5s --json"},
	"report": {"DIR",
		"Re-renders summary.md, summary.csv, series.csv, charts and index.html from DIR/results.json\nand prints the headline table.",
		"stockbench report reports/flash"},
	"compare": {"OLD.json NEW.json [flags]",
		"The CI gate: prints OLD and NEW side by side and exits 1 when NEW regressed: any anomaly class\n(oversold, leaked or phantom units, lost or contradicted acks, refused-after-reserve, invariant\nviolations, drift, orphan or stale reservations) higher than in OLD, a\nstrategy or scenario of OLD missing from NEW, or a TPS drop / P99 rise past the thresholds that\nis also beyond the spread of the repeats (run both with --repeat). Exit 0 otherwise, 2 on bad input.",
		"stockbench compare base/results.json new/results.json --max-tps-drop 10% --max-p99-rise 20%"},
	"audit": {"--mysql-dsn DSN [--redis-addr HOST:PORT] [flags]",
		"The reconciliation job (对账): grades any MySQL (and Redis) in stockbench's schema with the\nauditor of run — oversold, phantom and leaked units, broken invariants, Redis drift field by field,\norphan and stale reservations — prints every figure, and exits 1 on an anomaly (0 clean, 2 bad input).",
		"stockbench audit --mysql-dsn 'user:pw@tcp(127.0.0.1:3306)/shop' --redis-addr 127.0.0.1:6379 --ledger FLASH-1=100"},
	"down": {"",
		"Removes stockbench containers a killed run left behind (docker backend), and the data\ndirectories of local runs whose process is gone. Takes no arguments.",
		"stockbench down"},
	"version": {"",
		"Prints the tool's version and revision. Takes no arguments.",
		"stockbench version"},
}
