#!/usr/bin/env bash
# Figures of `densefeed report` (issue 19): the size of each page and the
# time to write it and to render it in headless Chromium (Vega drawing every
# chart as SVG, measured by --dump-dom with a virtual-time budget: wall time of
# the whole browser run, start-up included), for
#   - the examples' ledger: tf32x3 (green, benchmarked), tf32 (red), the
#     KV-transfer example (green, trace checks) when kv_overlap is built;
#     experiment pages, the cp-affine-chain gate page and the ledger page;
#   - a ledger of N experiments (default 1000) written by report_ledger_writer
#     (36-case gate runs, one in three red, the green ones benchmarked): the ledger page and one
#     experiment page.
# Nothing is asserted: times depend on the machine and its load (printed).
#   tests/perf/report_html_figures.sh [BUILD_DIR] [N] [OUT_DIR]
# OUT_DIR keeps the pages and a screenshot of each (default: a temporary folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
n=${2:-1000}
df="$build/bin/densefeed"
[[ -x "$df" ]] || { echo "no $df: build the densefeed target first" >&2; exit 2; }
command -v chromium >/dev/null || { echo "no chromium (apt-get install chromium)" >&2; exit 2; }
work=${3:-$(mktemp -d)}
mkdir -p "$work"
echo "machine: $(uname -srm), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "chromium: $(chromium --version 2>/dev/null | head -1); libjs-vega $(dpkg-query -W -f='${Version}' libjs-vega)"

now() { date +%s.%N; }
# page LEDGER NAME ARGS...: write, render, screenshot; one line of figures.
page() {
  local ledger=$1 name=$2; shift 2
  local out="$work/$name.html" t0 t1 t2
  t0=$(now)
  "$df" report "$@" --ledger "$ledger" -o "$out" --json > "$work/$name.json"
  t1=$(now)
  chromium --headless --no-sandbox --disable-gpu --user-data-dir="$work/chromium" --virtual-time-budget=30000 --dump-dom "file://$out" \
    > "$work/$name.dom" 2>/dev/null
  t2=$(now)
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/chromium" --virtual-time-budget=30000 \
    --window-size=1280,2400 --screenshot="$work/$name.png" "file://$out" > /dev/null 2>&1
  local charts rendered
  charts=$(grep -o 'data-charts="[0-9]*"' "$work/$name.dom" | head -1 | tr -dc 0-9)
  rendered=$(grep -o 'data-charts-rendered="[0-9]*"' "$work/$name.dom" | head -1 | tr -dc 0-9)
  printf '%-34s %9d bytes (%7d without Vega)  write %6.2f s  render %6.2f s  charts %s/%s drawn  %s\n' "$name" "$(stat -c %s "$out")" \
    "$(python3 -c 'import re,sys; print(len(re.sub(r"</style>.*?</head>", "", open(sys.argv[1], encoding="utf-8").read(), flags=re.S).encode()))' "$out")" "$(echo "$t1 - $t0" | bc)" "$(echo "$t2 - $t1" | bc)" "${rendered:-?}" "${charts:-?}" \
    "$(grep -q 'data-chart-errors="' "$work/$name.dom" && echo 'ERRORS' || echo '')"
}

ex="$work/examples.db"
rm -f "$ex"*
echo
echo "=== the examples' ledger ($ex) ==="
set +e
"$df" --trust-worktree run experiments/cp-affine-chain-tf32x3.yaml --ledger "$ex" --jobs "$(nproc)" > "$work/run-tf32x3.txt"
"$df" --trust-worktree run experiments/cp-affine-chain-tf32.yaml --ledger "$ex" --jobs "$(nproc)" --no-bench > "$work/run-tf32.txt"
if [[ -x "$build/bin/kv_overlap" ]]; then
  "$df" --trust-worktree run experiments/kv-transfer-release-lock.yaml --ledger "$ex" --jobs "$(nproc)" > "$work/run-kv.txt"
fi
set -e
"$df" ledger list --ledger "$ex"
for id in $("$df" ledger list --ledger "$ex" --json | python3 -c 'import json,sys; print(" ".join(str(e["id"]) for e in json.load(sys.stdin)))'); do
  page "$ex" "examples-experiment-$id" "$id"
done
page "$ex" examples-gate-cp-affine-chain --gate cp-affine-chain
page "$ex" examples-ledger

big="$work/big.db"
rm -f "$big"*
echo
echo "=== a ledger of $n experiments ($big, report_ledger_writer) ==="
[[ -x "$build/bin/report_ledger_writer" ]] || { echo "no $build/bin/report_ledger_writer: build the report_ledger_writer target" >&2; exit 2; }
t0=$(now)
"$build/bin/report_ledger_writer" "$big" . "$n"
echo "written in $(echo "$(now) - $t0" | bc) s"
page "$big" "big-ledger-$n" 
page "$big" "big-gate-$n" --gate cp-affine-chain
# The gate history's drawn size (Vega's <svg width height>): a fixed width past 15 experiments, not 70 px each.
echo "big-gate-$n history chart: $(grep -o '<svg[^>]*>' "$work/big-gate-$n.dom" | head -1 | grep -o ' width="[0-9.]*"\| height="[0-9.]*"' | tr -d '\n')"
page "$big" "big-experiment-$n" "$n"
echo
echo "pages, DOMs and screenshots: $work"
