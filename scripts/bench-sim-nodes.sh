#!/usr/bin/env bash
# Measures node heartbeats with `keel sim nodes` on this machine, for two stacks, one after the
# other (see scripts/lib/stacks.sh): `keel up`, and `keel apiserver` on a real etcd 3.5.1, both with
# the node lifecycle controller on (keel up runs every controller; keel apiserver gets
# --controllers=*). For each node count in COUNTS and each stack, a fresh stack is started, the
# simulator registers the nodes, renews every lease each 10 s (the kubelet's interval; 40 s
# leases) and posts each node's status every 5 m for DURATION, and then deletes what it made.
#
# Prints a markdown table (one column per stack and node count): renewals/s achieved and offered,
# lease PUT p50/p99, 409s, 429s, errors (any other failure, 5xx included), false NotReady (a
# node that was renewing and still turned NotReady), server CPU per renewal (utime + stime of the
# apiserver and etcd over the whole simulation, registration and cleanup included, divided by the
# renewals; status posts and the controller ride on it), the simulator's own CPU per renewal (it shares the cores), and the servers' peak
# RSS growth per node. A stack holds a count when it achieves at least 95% of the offered
# renewals with a PUT p99 under 1 s, no errors and no false NotReady.
#
# Usage: scripts/bench-sim-nodes.sh [--counts "5000 50000"] [--duration 10m] [--stacks "up on-etcd"]
#                                   [--no-build] [--keep]
# Environment: SIM_EXTRA_ARGS is appended to each `keel sim nodes`; UP_EXTRA_ARGS /
# APISERVER_EXTRA_ARGS / ETCD_EXTRA_ARGS to each server's command line. The keel binary is
# $CARGO_TARGET_DIR/release/keel (target/release/keel without CARGO_TARGET_DIR).
set -euo pipefail

COUNTS="5000 50000"
DURATION=10m
STACKS="up on-etcd"
BUILD=1
KEEP=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench-sim-nodes: $*" >&2; exit 1; }
say() { echo "bench-sim-nodes: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --counts) [[ $# -ge 2 ]] || die "--counts needs a list"; COUNTS=$2; shift ;;
        --duration) [[ $# -ge 2 ]] || die "--duration needs a value"; DURATION=$2; shift ;;
        --stacks) [[ $# -ge 2 ]] || die "--stacks needs a list"; STACKS=$2; shift ;;
        --no-build) BUILD=0 ;;
        --keep) KEEP=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
done
for count in $COUNTS; do [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "not a node count: $count"; done
for stack in $STACKS; do [[ "$stack" == up || "$stack" == on-etcd ]] || die "unknown stack: $stack"; done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=lib/stacks.sh
source "$ROOT/scripts/lib/stacks.sh"
keel_release "sim nodes"
APISERVER_EXTRA_ARGS="--controllers=* ${APISERVER_EXTRA_ARGS:-}"
# Both stores get etcd's largest advised backend quota (8 GiB): 50,000 nodes write about
# 2 GiB of lease history between two of the apiserver's 5-minute compactions, past the 2 GiB
# default, which would raise the NOSPACE alarm mid-run on either stack.
QUOTA="--quota-backend-bytes 8589934592"
UP_EXTRA_ARGS="$QUOTA ${UP_EXTRA_ARGS:-}"
ETCD_EXTRA_ARGS="$QUOTA ${ETCD_EXTRA_ARGS:-}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-sim-nodes.XXXXXX")
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# rss_kib NAME FIELD : VmRSS or VmHWM (peak) of a server process in KiB (0 if not running).
rss_kib() {
    local pid=${PID[$1]:-}
    [[ -n "$pid" ]] || { echo 0; return; }
    awk -v f="$2:" '$1 == f {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0
}

# simulate STACK COUNT : one `keel sim nodes` run against the running stack.
simulate() {
    local stack=$1 count=$2 out="$WORK/$stack-$count.json" rc=0
    local api0 etcd0 api1 etcd1 rss0 hwm1
    api0=$(ticks apiserver)
    etcd0=$(ticks etcd)
    rss0=$(($(rss_kib apiserver VmRSS) + $(rss_kib etcd VmRSS)))
    say "$stack: $count nodes, renewing every 10 s for $DURATION"
    # shellcheck disable=SC2086 # the extra args are meant to be word-split
    "$KEEL" sim nodes --kubeconfig "$KUBECONFIG_OF" --count "$count" --duration "$DURATION" \
        --json ${SIM_EXTRA_ARGS:-} >"$out" 2>"$WORK/$stack-$count.log" || rc=$?
    api1=$(ticks apiserver)
    etcd1=$(ticks etcd)
    hwm1=$(($(rss_kib apiserver VmHWM) + $(rss_kib etcd VmHWM)))
    if [[ "$(head -c 1 "$out")" != "{" ]]; then
        say "  failed (exit $rc): $(tail -c 300 "$WORK/$stack-$count.log")"
        printf '%s\t%s\trenewals_per_s\tfail\n' "$stack" "$count" >>"$RESULTS"
        return 0
    fi
    python3 - "$out" "$stack" "$count" "$RESULTS" "$CLK_TCK" "$api0" "$api1" "$etcd0" "$etcd1" \
        "$rss0" "$hwm1" <<'PY'
import json, sys
out, stack, count, path, tck = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
api0, api1, etcd0, etcd1, rss0, hwm1 = (int(x) for x in sys.argv[6:12])
r = json.loads(open(out).read())
rows = {k: r[k] for k in ("renewals_per_s", "p50_ms", "p99_ms", "conflicts", "throttled", "errors",
                          "false_not_ready", "status_updates", "cpu_us_per_renewal")}
rows["offered"] = count / 10
if r["renewals"] > 0:
    rows["server_cpu_us"] = (api1 - api0 + etcd1 - etcd0) * 1e6 / tck / r["renewals"]
rows["rss_per_node_kib"] = max(hwm1 - rss0, 0) / count
rows["held"] = int(rows["renewals_per_s"] >= 0.95 * rows["offered"] and r["p99_ms"] < 1000
                   and r["errors"] == 0 and r["false_not_ready"] == 0)
with open(path, "a") as f:
    for k, v in rows.items():
        f.write(f"{stack}\t{count}\t{k}\t{v}\n")
print(f"  {r['renewals_per_s']:.0f} renewals/s of {count / 10:.0f}, p99 {r['p99_ms']:.1f} ms, "
      f"errors {r['errors']}, 429s {r['throttled']}, false NotReady {r['false_not_ready']}, "
      f"server CPU/renewal {rows.get('server_cpu_us', 0):.0f} µs", file=sys.stderr)
PY
}

for count in $COUNTS; do
    for stack in $STACKS; do
        start_stack "$stack" "$WORK/$stack-$count"
        simulate "$stack" "$count"
        stop_stack
    done
done

# --- table ----------------------------------------------------------------------------------
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
KEEL_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$RESULTS" "$DURATION" "$ETCD_VERSION" "$KEEL_REV" "$(nproc)" "$CPU" <<'PY'
import sys
from collections import defaultdict
path, duration, etcd_version, keel_rev, cores, cpu = sys.argv[1:7]
cells, columns = {}, []
for line in open(path):
    stack, count, metric, value = line.rstrip("\n").split("\t")
    if (stack, count) not in columns:
        columns.append((stack, count))
    cells[(stack, count, metric)] = value
names = {"up": "keel up", "on-etcd": "keel apiserver + etcd"}
rows = [
    ("offered", "renewals/s offered", 0),
    ("renewals_per_s", "renewals/s achieved ↑", 0),
    ("p50_ms", "lease PUT p50 (ms ↓)", 1),
    ("p99_ms", "lease PUT p99 (ms ↓, SLO 1,000)", 1),
    ("conflicts", "409 Conflicts", 0),
    ("throttled", "429 Too Many Requests", 0),
    ("errors", "errors (5xx, timeouts; must be 0)", 0),
    ("false_not_ready", "false NotReady (must be 0)", 0),
    ("server_cpu_us", "server CPU per renewal (µs ↓, apiserver + etcd)", 0),
    ("cpu_us_per_renewal", "simulator CPU per renewal (µs, same cores)", 0),
    ("rss_per_node_kib", "server peak RSS growth per node (KiB ↓)", 1),
    ("held", "holds it (≥95% of offered, p99 < 1 s, 0 errors, 0 false NotReady)", None),
]
def show(value, digits):
    if value is None:
        return "n/a"
    if value == "fail":
        return "fail"
    if digits is None:
        return "yes" if float(value) else "no"
    return f"{float(value):,.{digits}f}"
print(f"keel {keel_rev}: `keel sim nodes` (leases renewed every 10 s, status every 5 m, {duration}) "
      f"against `keel up` and `keel apiserver` on etcd {etcd_version}, node lifecycle controller on, "
      f"simulator and server on the same {cores} cores ({cpu}).")
print()
print("| metric | " + " | ".join(f"{names[s]}, {int(c):,} nodes" for s, c in columns) + " |")
print("|---|" + "---:|" * len(columns))
for metric, label, digits in rows:
    print(f"| {label} | " + " | ".join(show(cells.get((s, c, metric)), digits) for s, c in columns) + " |")
PY
