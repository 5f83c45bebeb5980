# stockbench — see README.md.
GO      ?= go
BIN     := bin/stockbench
# Extra flags for `make bench`, e.g. make bench BENCH_FLAGS="--seed 2"
BENCH_FLAGS ?=
# make observe: a run with Prometheus beside it, e.g.
# make observe OBSERVE_FLAGS="--strategies rowlock,lua-tcc --scenario sustained --duration 30s"
OBSERVE_FLAGS ?= --strategies rowlock,lua-tcc --scenario sustained --duration 30s
# Extra flags for `make faults`, e.g. make faults FAULTS_FLAGS="--seed 2 --redis-persistence everysec"
FAULTS_FLAGS ?=
# Extra flags for the curve that ends `make bench`, e.g. CURVE_FLAGS="--slo p99=100ms"
CURVE_FLAGS ?=
# make soak: measured phase per strategy, and extra flags, e.g.
# make soak SOAK_DURATION=1h SOAK_FLAGS="--strategies outbox"
SOAK_DURATION ?= 10m
SOAK_FLAGS ?=
# Flags for every run of `make screenshots` (default: --backend local)
SCREENSHOTS_FLAGS ?= --backend local

.PHONY: build test bench bench-multi faults soak observe vet fmt fmt-check clean images-offline down hooks screenshots projection

# go generate refreshes the strategies' core-line counts the binary carries
# (TestCoreLinesCurrent fails when the committed ones are stale).
build:
	$(GO) generate ./strategies/registry
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/stockbench

# The whole suite, servers included (started by the harness's local provider).
# scripts/setup.sh installs MariaDB/Redis and builds the offline images when
# they are missing (STOCKBENCH_SKIP_SETUP=1 skips that).
test: vet fmt-check
	GO=$(GO) scripts/setup.sh test
	# -timeout is a hang guard, not a speed claim: cmd/stockbench took 40 min
	# with two busy loops and five agents on the two cores (11 min quiet).
	$(GO) test -race -count=1 -timeout 90m ./...
	# The conformance suite again, on a 3-master Redis Cluster.
	STOCKBENCH_TEST_REDIS_CLUSTER=3 $(GO) test -race -count=1 -timeout 45m -run TestConformance ./strategies
	# At READ COMMITTED (--isolation rc): the strategies' sessions at the
	# other level, the article's Q&A's row-lock setting.
	STOCKBENCH_TEST_ISOLATION=rc $(GO) test -race -count=1 -timeout 45m -run TestConformance ./strategies
	# And on a 3-node Galera cluster, buyers spread over its primaries.
	STOCKBENCH_TEST_MYSQL_CLUSTER=3 $(GO) test -race -count=1 -timeout 45m -run TestConformance ./strategies

# The default comparison, every strategy, auto backend: the flash sale
# (correctness: does anything oversell?) then a sustained run on one hot SKU
# (throughput and tail latency), with the stores' calibrated ceilings. The
# flash is the seed's no-atomicity experiment (100 units, 120 buyers, every
# one pays 200-500 ms later; flash abandons only when --abandon is given). A
# tenth of the sustained buyers abandon, with a 2 s TTL shorter than the run,
# so expiry runs under load and the audit sees it.
#
# Then a short latency-vs-load curve (open loop, P99 against offered load,
# SLO p99=50ms) for one strategy of each family — row lock, coalesced
# conditional UPDATE, Redis Lua — into reports/latest/curve; `stockbench
# curve` alone runs the full one. BENCH_FLAGS go to both (the backend, the
# seed…); CURVE_FLAGS to the curve only.
# make bench models no network (loopback; the report's Network line says
# so); BENCH_FLAGS="--rtt same-zone" puts the stores one zone away.
bench: build
	scripts/setup.sh bench $(BENCH_FLAGS)
	./$(BIN) run --strategies all --scenario flash,sustained --duration 10s --warmup 2s \
		--ttl 2s --mix confirm=0.8,cancel=0.1,abandon=0.1 $(BENCH_FLAGS)
	./$(BIN) curve --strategies rowlock,batched,lua-tcc --rates 100,500,2500 $(BENCH_FLAGS) \
		--duration 2s --warmup 500ms --out reports/latest/curve $(CURVE_FLAGS)

# make bench's comparison played by two generator containers (host
# networking, this binary mounted read-only) against the same servers,
# merged exactly and audited once, into reports/multi
# (docs/generators.md). Shorter phases than make bench: about 3 minutes on 2 cores.
# Extra flags: make bench-multi BENCH_FLAGS="--procs 3".
bench-multi: build
	scripts/setup.sh bench $(BENCH_FLAGS)
	./$(BIN) run --procs 2 --generators docker --strategies all --scenario flash,sustained --duration 8s --warmup 2s \
		--ttl 2s --mix confirm=0.8,cancel=0.1,abandon=0.1 --out reports/multi $(BENCH_FLAGS)

# The projection validated on this machine (docs/projection.md): the five
# strategies of the article's question unconstrained and under three CPU
# budget splits, medians of 3, then the error table of `stockbench project
# --against` into reports/projection/errors.md. About 10 minutes on 2
# cores; it means little on a crowded machine. Extra flags go to every
# run: make projection PROJECTION_FLAGS="--backend docker --rtt same-zone".
projection: build
	scripts/setup.sh bench $(PROJECTION_FLAGS)
	BIN=$(BIN) scripts/projection.sh $(PROJECTION_FLAGS)

# The fault matrix: every strategy under Redis pause, Redis restart, MySQL
# restart, latency and an app crash, a short sustained run each, auto
# backend, into reports/faults (docs/faults.md). About 5 minutes on 2 cores.
faults: build
	scripts/setup.sh bench $(FAULTS_FLAGS)
	./$(BIN) faults --out reports/faults $(FAULTS_FLAGS)

# A run watched live: Debian's Prometheus started beside it (generated
# config in a temp dir, loopback only, deploy/prometheus/rules.yml),
# scraping its --metrics-addr every second, torn down with the run.
# docs/observe.md.
observe: build
	scripts/setup.sh bench $(OBSERVE_FLAGS)
	BIN=$(BIN) scripts/observe.sh $(OBSERVE_FLAGS)

# Drift over time: every strategy in turn, sustained on 10 hot SKUs with
# 128 buyers, a tenth cancelling and a tenth abandoning (TTL 2 s, so expiry
# runs all along), SOAK_DURATION each (default 10 minutes: over 100 minutes
# for every strategy on 2 cores), into reports/soak: summary.md's "Drift
# over the run" (first against last window) and charts/drift-*.png
# (throughput and P99 per minute, harness/MySQL/Redis memory, table rows,
# outbox relay lag). Not part of CI. docs/long-runs.md.
soak: build
	scripts/setup.sh bench $(SOAK_FLAGS)
	./$(BIN) run --strategies all --scenario sustained --skus 10 --buyers 128 \
		--mix confirm=0.8,cancel=0.1,abandon=0.1 --ttl 2s --warmup 5s --duration $(SOAK_DURATION) \
		--out reports/soak $(SOAK_FLAGS)

vet:
	$(GO) vet ./...

# The repository's git hooks (.githooks): commit subjects of at most 72
# characters. docs/ci.md.
hooks:
	git config core.hooksPath .githooks

# MySQL-compatible (MariaDB) and Redis images from Debian packages, for a
# Docker engine with no registry; --backend auto and docker use them when
# the official images cannot be pulled. Needs debootstrap and root; make
# bench and make test build them when missing (scripts/setup.sh).
images-offline:
	docker/build-offline-images.sh

# Remove leftover stockbench containers.
down: build
	./$(BIN) down

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -rf bin

# The pictures of docs/screenshots that short runs make (the README's
# among them), regenerated from the current code: pages photographed with
# headless Chromium, charts copied from the reports (scripts/screenshots.sh
# names the ones that come from hour-long runs instead). About 10 minutes.
screenshots: build
	GO=$(GO) scripts/setup.sh bench $(SCREENSHOTS_FLAGS)
	SCREENSHOTS_FLAGS="$(SCREENSHOTS_FLAGS)" BIN=$(BIN) scripts/screenshots.sh
