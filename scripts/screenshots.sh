#!/usr/bin/env bash
# make screenshots: regenerates the pictures in docs/screenshots that a
# short run can make, from the current code, so they never show an older
# report than the code writes. Pages are photographed with headless
# Chromium (Debian's `chromium`, installed here when missing, as root);
# charts are the report's own PNGs.
#
#   article-top.png, article-charts.png   stockbench run --preset article
#   repeat3-top.png, repeat3-charts.png   the same with --repeat 3
#   curve-p99.png                         make bench's curve
#   flash-units-left.png, flash-timeline.png  a 10^4-buyer flash sale
#   usl.png                               a buyers sweep with its USL fits
#
# The other pictures come from runs of an hour or from sweeps documented
# beside them (docs/long-runs.md, docs/network.md); regenerate those with
# the commands given there. SCREENSHOTS_FLAGS go to every run (e.g.
# --backend docker); the runs use the local backend by default.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/stockbench}
FLAGS=${SCREENSHOTS_FLAGS:---backend local}
OUT=docs/screenshots
WORK=$(mktemp -d -t stockbench-screenshots-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

say() { echo "screenshots: $*" >&2; }

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing chromium (headless pages)"
    apt-get install -y -qq chromium >/dev/null
    browser=$(command -v chromium)
  else
    say "needs chromium: apt-get install chromium (as root)"
    exit 1
  fi
fi

# shot PAGE PNG: a 1400×1000 picture of the top of PAGE.
shot() {
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000 \
    --window-size=1400,1000 --screenshot="$2" "file://$(realpath "$1")" >/dev/null 2>&1
  [ -s "$2" ] || { say "no picture of $1"; exit 1; }
  say "wrote $2"
}

# charts DIR PNG: the report's first charts side by side, two a row (a
# headless browser does not reliably scroll to the page's own #charts).
charts() {
  local page="$1/charts-grid.html"
  {
    echo '<!DOCTYPE html><html><body style="margin:8px;display:flex;flex-wrap:wrap;gap:8px">'
    for c in tradeoff-sustained tps-sustained p99-sustained oversell-flash; do
      [ -f "$1/charts/$c.png" ] && echo "<img src=\"charts/$c.png\" style=\"width:680px\">"
    done
    echo '</body></html>'
  } >"$page"
  shot "$page" "$2"
}

# shellcheck disable=SC2086
"$BIN" run --preset article $FLAGS --quiet --out "$WORK/article" >/dev/null
shot "$WORK/article/index.html" "$OUT/article-top.png"
charts "$WORK/article" "$OUT/article-charts.png"

# shellcheck disable=SC2086
"$BIN" run --preset article --repeat 3 $FLAGS --quiet --out "$WORK/repeat3" >/dev/null
shot "$WORK/repeat3/index.html" "$OUT/repeat3-top.png"
charts "$WORK/repeat3" "$OUT/repeat3-charts.png"

# shellcheck disable=SC2086
"$BIN" curve --strategies rowlock,batched,lua-tcc --rates 100,500,2500 --duration 2s --warmup 500ms \
  $FLAGS --quiet --out "$WORK/curve" >/dev/null
cp "$WORK/curve/charts/curve-p99.png" "$OUT/curve-p99.png" && say "wrote $OUT/curve-p99.png"

# shellcheck disable=SC2086
"$BIN" run --strategies lua-tcc,rowlock,naive --scenario flash --stock 1000 --buyers 10000 --calibrate 0 \
  $FLAGS --quiet --out "$WORK/flash" >/dev/null || true # naive oversells: exit 0 or 1 both draw
cp "$WORK/flash/charts/flash-units-left.png" "$OUT/flash-units-left.png" && say "wrote $OUT/flash-units-left.png"
timeline=$(ls "$WORK"/flash/charts/flash-events-lua-tcc-*.png 2>/dev/null | head -n 1)
if [ -n "$timeline" ]; then
  cp "$timeline" "$OUT/flash-timeline.png" && say "wrote $OUT/flash-timeline.png"
else
  say "kept $OUT/flash-timeline.png (no lua-tcc timeline chart in this run)"
fi

# The scalability curve: a buyers sweep of four strategies, the USL fitted
# to each (docs/cost.md). About 5 minutes on 2 cores.
# shellcheck disable=SC2086
"$BIN" sweep --param buyers=1,2,4,8,16,32,64,128,256 --strategies rowlock,lua-tcc,batched,outbox-local --scenario sustained \
  --duration 5s --warmup 1s --calibrate 0 $FLAGS --quiet --out "$WORK/usl" >/dev/null
cp "$WORK/usl/charts/usl.png" "$OUT/usl.png" && say "wrote $OUT/usl.png"
