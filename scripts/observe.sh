#!/usr/bin/env bash
# make observe: a run of stockbench with Debian's Prometheus beside it,
# scraping its --metrics-addr every second with deploy/prometheus's rules,
# from a generated config in a temporary directory; Prometheus and the
# directory are removed when the run ends, Ctrl-C included.
#
#   scripts/observe.sh [RUN FLAGS]
#
# OBSERVE_METRICS (127.0.0.1:9464) and OBSERVE_PROMETHEUS (127.0.0.1:9090)
# are the two loopback addresses. docs/observe.md.
set -euo pipefail
cd "$(dirname "$0")/.."

metrics=${OBSERVE_METRICS:-127.0.0.1:9464}
prom=${OBSERVE_PROMETHEUS:-127.0.0.1:9090}
bin=${BIN:-bin/stockbench}

if ! command -v prometheus >/dev/null 2>&1; then
  echo "observe: prometheus is not installed (Debian: apt-get install prometheus; scripts/setup.sh test installs it)" >&2
  exit 1
fi
case $metrics in 127.*|localhost:*|\[::1\]:*) ;; *) echo "observe: OBSERVE_METRICS $metrics: loopback only" >&2; exit 2 ;; esac
case $prom in 127.*|localhost:*|\[::1\]:*) ;; *) echo "observe: OBSERVE_PROMETHEUS $prom: loopback only" >&2; exit 2 ;; esac

tmp=$(mktemp -d -t stockbench-observe.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

sed -e "s#RULES#$PWD/deploy/prometheus/rules.yml#" -e "s#TARGET#$metrics#" \
  deploy/prometheus/prometheus.yml.tmpl >"$tmp/prometheus.yml"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="$prom" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -fsS "http://$prom/-/ready" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/prometheus.log" >&2; exit 1; }
  sleep 0.1
done
echo "observe: Prometheus at http://$prom (graph: stockbench:flows:rate10s), scraping http://$metrics/metrics" >&2
rc=0
"$bin" run --metrics-addr "$metrics" "$@" || rc=$?
# One more scrape and rule evaluation after the run, then the figures.
sleep 2
curl -fsS "http://$prom/api/v1/query" --data-urlencode 'query=max_over_time(stockbench:flows:rate10s[1h])' \
  | sed 's/^/observe: peak flows\/s (10 s rate): /' >&2 || true
echo >&2
exit $rc
