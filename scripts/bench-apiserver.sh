#!/usr/bin/env bash
# Measures the Kubernetes API with `keel bench apiserver` on this machine, in one run, for two stacks:
#   up       : `keel up` (keel store and the apiserver in one process)
#   on-etcd  : `keel apiserver --etcd-servers` on a real etcd 3.5.1 (two processes)
# Each stack is started fresh (its data under one temporary folder, same disk), warmed up for WARMUP,
# then given the same load: CLIENTS lease renewers (one coordination.k8s.io/v1 Lease each, renewed as
# the kubelet renews its node lease: GET, bump spec.renewTime, PUT with the resourceVersion read,
# GET again on 409), paced to RATE updates/s in all, for DURATION, while WATCHERS watchers watch the
# namespace's leases; every acknowledged update must reach every watcher (lost events must be 0).
# With --runs N both stacks are measured N times, alternating which goes first, and medians reported.
#
# Prints a markdown table (metric | keel up | keel apiserver + etcd | up/on-etcd) with the updates/s
# achieved, PUT (the mutating request) and GET latency, watch delivery latency (PUT sent -> MODIFIED
# event received), lost events, 409 conflicts, and CPU per update: utime + stime from /proc/PID/stat
# over the measured run, divided by the updates acknowledged, of the apiserver process (for keel up
# the whole stack), of etcd, of the whole stack, and of the load generator (which shares the cores),
# and how many cores everything else on the machine kept busy meanwhile (0 on a quiet machine).
#
# Usage: scripts/bench-apiserver.sh [--runs N] [--no-build] [--keep]
#   --runs N     measure both stacks N times and report medians (default 1)
#   --no-build   use the keel binary already built
#   --keep       keep the temporary folder (server logs, raw results)
# Environment: CLIENTS / WATCHERS / RATE / DURATION / WARMUP override 100 / 100 / 2000 / 30s / 5s
# (WARMUP=0 skips the warm-up); BENCH_EXTRA_ARGS is appended to each `keel bench apiserver`;
# UP_EXTRA_ARGS / APISERVER_EXTRA_ARGS / ETCD_EXTRA_ARGS to each server's command line. The keel
# binary is $CARGO_TARGET_DIR/release/keel (target/release/keel without CARGO_TARGET_DIR).
set -euo pipefail

RUNS=1
BUILD=1
KEEP=0
CLIENTS=${CLIENTS:-100}
WATCHERS=${WATCHERS:-100}
RATE=${RATE:-2000}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-5s}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench-apiserver: $*" >&2; exit 1; }
say() { echo "bench-apiserver: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"; RUNS=$2; shift ;;
        --runs=*) RUNS=${1#--runs=}; [[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number" ;;
        --no-build) BUILD=0 ;;
        --keep) KEEP=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=lib/stacks.sh
source "$ROOT/scripts/lib/stacks.sh"
keel_release "bench apiserver"

# --- servers --------------------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-apiserver.XXXXXX")
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"; }

BENCH_ARGS=(--clients "$CLIENTS" --watchers "$WATCHERS" --rate "$RATE")

# measure STACK RUN : one measured `keel bench apiserver` run against the running stack.
measure() {
    local stack=$1 run=$2 out="$WORK/$stack-$run.json" rc=0 api0 etcd0 api1 etcd1 load
    local busy0 busy1 t0 t1
    if [[ "$WARMUP" != 0 && "$WARMUP" != 0s ]]; then
        say "run $run: $stack: warm-up for $WARMUP"
        # shellcheck disable=SC2086
        "$KEEL" bench --json apiserver --kubeconfig "$KUBECONFIG_OF" "${BENCH_ARGS[@]}" \
            --duration "$WARMUP" ${BENCH_EXTRA_ARGS:-} >/dev/null 2>>"$WORK/bench-stderr.log" ||
            say "  warm-up failed: $(tail -n 1 "$WORK/bench-stderr.log")"
    fi
    say "run $run: $stack: $RATE updates/s offered by $CLIENTS clients, $WATCHERS watchers, $DURATION"
    api0=$(ticks apiserver)
    etcd0=$(ticks etcd)
    busy0=$(busy_ticks)
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    { TIMEFORMAT='%U %S'; time "$KEEL" bench --json apiserver --kubeconfig "$KUBECONFIG_OF" \
        "${BENCH_ARGS[@]}" --duration "$DURATION" ${BENCH_EXTRA_ARGS:-} \
        >"$out" 2>>"$WORK/bench-stderr.log" || rc=$?; } 2>"$WORK/time"
    t1=$(date +%s.%N)
    busy1=$(busy_ticks)
    api1=$(ticks apiserver)
    etcd1=$(ticks etcd)
    load=$(awk '{print $1 + $2}' "$WORK/time" 2>/dev/null || echo 0)
    if [[ "$(head -c 1 "$out")" != "{" ]]; then
        say "  failed (exit $rc): $(tail -n 3 "$WORK/bench-stderr.log" | tr '\n' ' ')"
        record "$stack" updates fail
        return 0
    fi
    [[ $rc == 0 ]] || say "  exit $rc: $(tail -n 1 "$WORK/bench-stderr.log")"
    python3 - "$out" "$stack" "$RESULTS" "$CLK_TCK" "$api0" "$api1" "$etcd0" "$etcd1" "$load" \
        "$busy0" "$busy1" "$t0" "$t1" <<'PY'
import json, sys
out, stack, path, tck = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
api0, api1, etcd0, etcd1 = (int(x) for x in sys.argv[5:9])
load = float(sys.argv[9])
busy0, busy1 = int(sys.argv[10]), int(sys.argv[11])
wall = float(sys.argv[13]) - float(sys.argv[12])
r = json.loads(open(out).read())
updates = r["updates"]
rows = {k: r[k] for k in ("update_rate", "put_p50_ms", "put_p99_ms", "put_max_ms", "get_p50_ms",
                          "get_p99_ms", "watch_p50_ms", "watch_p99_ms", "watch_max_ms", "lost",
                          "duplicates", "conflicts", "failed_updates", "updates", "drain_s")}
if updates > 0:
    us = 1e6 / tck / updates
    rows["cpu_apiserver_us"] = (api1 - api0) * us
    if etcd1 or etcd0:
        rows["cpu_etcd_us"] = (etcd1 - etcd0) * us
    rows["cpu_stack_us"] = (api1 - api0 + etcd1 - etcd0) * us
    rows["cpu_load_us"] = load * 1e6 / updates
# Cores kept busy by everything else on the machine during the run (other users' work).
others = (busy1 - busy0) / tck - (api1 - api0 + etcd1 - etcd0) / tck - load
rows["other_cores"] = max(others, 0.0) / wall if wall > 0 else 0.0
with open(path, "a") as f:
    for k, v in rows.items():
        f.write(f"{stack}\t{k}\t{v}\n")
print(f"  {r['update_rate']:.0f} updates/s, PUT p99 {r['put_p99_ms']:.2f} ms, watch p99 "
      f"{r['watch_p99_ms']:.2f} ms, lost {r['lost']}, conflicts {r['conflicts']}, "
      f"stack CPU/update {rows.get('cpu_stack_us', 0):.0f} µs", file=sys.stderr)
PY
}

for run in $(seq "$RUNS"); do
    say "=== run $run of $RUNS ==="
    if ((run % 2 == 1)); then order=(up on-etcd); else order=(on-etcd up); fi
    for stack in "${order[@]}"; do
        start_stack "$stack" "$WORK/$stack-$run"
        measure "$stack" "$run"
        stop_stack
    done
done

# --- table ----------------------------------------------------------------------------------
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
FS=$(df -T "$WORK" | awk 'NR == 2 {print $1 " (" $2 ")"}')
KEEL_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$RESULTS" "$RUNS" "$CLIENTS" "$WATCHERS" "$RATE" "$DURATION" "$ETCD_VERSION" \
    "$KEEL_REV" "$(nproc)" "$CPU" "$FS" <<'PY'
import statistics, sys
from collections import defaultdict
path, runs, clients, watchers, rate, duration, etcd_version, keel_rev, cores, cpu, fs = sys.argv[1:12]
cells = defaultdict(list)
for line in open(path):
    stack, metric, value = line.rstrip("\n").split("\t")
    cells[(stack, metric)].append(value)

def median(stack, metric):
    values = cells.get((stack, metric))
    if not values:
        return None
    if "fail" in values:
        return "fail"
    return statistics.median(float(v) for v in values)

rate_i = int(rate)
rows = [
    ("update_rate", f"lease updates achieved (updates/s ↑, {rate_i:,} offered)", 0),
    ("put_p99_ms", "PUT (mutating) p99 (ms ↓)", 2),
    ("put_p50_ms", "PUT p50 (ms ↓)", 2),
    ("put_max_ms", "PUT max (ms ↓)", 1),
    ("get_p99_ms", "GET p99 (ms ↓)", 2),
    ("get_p50_ms", "GET p50 (ms ↓)", 2),
    ("watch_p99_ms", f"watch delivery p99, PUT sent → event, {int(watchers):,} watchers (ms ↓)", 2),
    ("watch_p50_ms", "watch delivery p50 (ms ↓)", 2),
    ("watch_max_ms", "watch delivery max (ms ↓)", 1),
    ("lost", "lost events (must be 0)", 0),
    ("duplicates", "duplicate events (must be 0)", 0),
    ("conflicts", "409 Conflicts", 0),
    ("failed_updates", "failed updates", 0),
    ("cpu_apiserver_us", "CPU per update: apiserver process (µs ↓; keel up: the whole stack)", 1),
    ("cpu_etcd_us", "CPU per update: etcd (µs ↓)", 1),
    ("cpu_stack_us", "CPU per update: whole stack (µs ↓)", 1),
    ("cpu_load_us", "CPU per update: load generator (µs, same cores)", 1),
    ("other_cores", "other processes on the machine during the run (cores busy)", 2),
]

def show(value, digits):
    if value is None:
        return "n/a"
    if value == "fail":
        return "fail"
    return f"{value:,.{digits}f}"

def ratio(a, b):
    if isinstance(a, float) and isinstance(b, float) and b > 0:
        return f"{a / b:.2f}×"
    return "n/a"

print(f"keel {keel_rev}: `keel up` vs `keel apiserver` on etcd {etcd_version}, one after the other on the same "
      f"machine: {cores} cores {cpu}, data on {fs}. `keel bench apiserver`: {int(clients):,} renewers "
      f"(one Lease each, GET + PUT like the kubelet), {rate_i:,} updates/s offered for {duration}, "
      f"{int(watchers):,} watchers of the namespace's leases, HTTP/2"
      + (f", medians of {runs} runs" if int(runs) > 1 else "") + ".")
print()
print("CPU per update: utime + stime of the process over the measured run, divided by the updates "
      "acknowledged, in µs; the load generator runs on the same cores.")
print()
print("| metric | keel up | keel apiserver + etcd | up / on-etcd |")
print("|---|---:|---:|---:|")
for metric, label, digits in rows:
    u, e = median("up", metric), median("on-etcd", metric)
    if u is None and e is None:
        continue
    if metric == "cpu_etcd_us":
        print(f"| {label} | (in process) | {show(e, digits)} | n/a |")
        continue
    if metric == "other_cores":
        print(f"| {label} | {show(u, digits)} | {show(e, digits)} | n/a |")
        continue
    print(f"| {label} | {show(u, digits)} | {show(e, digits)} | {ratio(u, e)} |")
print()
for stack, name in (("up", "keel up"), ("on-etcd", "keel apiserver + etcd")):
    r, p99, lost = (median(stack, m) for m in ("update_rate", "put_p99_ms", "lost"))
    if not all(isinstance(v, float) for v in (r, p99, lost)):
        print(f"Target ({rate_i:,} updates/s, {int(watchers):,} watchers, PUT p99 < 50 ms, 0 lost): {name}: no result")
        continue
    met = r >= 0.98 * rate_i and p99 < 50 and lost == 0
    print(f"Target ({rate_i:,} updates/s, {int(watchers):,} watchers, PUT p99 < 50 ms, 0 lost): {name}: "
          f"{'met' if met else 'not met'} ({r:,.0f} updates/s, PUT p99 {p99:.2f} ms, {lost:.0f} lost)")
PY
