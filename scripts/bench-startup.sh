#!/usr/bin/env bash
# Measures how fast a Kubernetes API comes up, and custom resources applied with a CEL rule,
# on this machine, in one run, for two stacks:
#   up       : `keel up` (keel store and the apiserver in one process)
#   on-etcd  : etcd 3.5.1, then `keel apiserver --etcd-servers` on it (the shape a controller's
#              test suite starts with envtest: a store, then an API server)
# For each stack, started fresh in its own temporary folder (same disk):
#   1. start-to-ready, empty: from launching the first process until `/readyz` answers `ok`
#      (polled every 5 ms);
#   2. start-to-ready with FILL objects: FILL ConfigMaps written, the stack stopped (SIGTERM),
#      started again on the same data, timed as in 1;
#   3. a CRD with one CEL rule (x-kubernetes-validations) created and waited for, then APPLY
#      custom resources server-side applied (32 clients, HTTP keep-alive), paced to RATE a
#      second: the rate achieved, p50 and p99 latency, errors, and CPU per apply (utime + stime
#      of the stack's processes over the run, from /proc, divided by the applies).
# With --runs N each stack is measured N times, alternating which goes first; medians reported.
#
# Usage: scripts/bench-startup.sh [--runs N] [--no-build] [--keep]
# Environment: FILL / APPLY / RATE override 10000 / 3000 / 1000. The keel binary is
# $CARGO_TARGET_DIR/release/keel (target/release/keel without CARGO_TARGET_DIR).
set -euo pipefail

RUNS=1
BUILD=1
KEEP=0
FILL=${FILL:-10000}
APPLY=${APPLY:-3000}
RATE=${RATE:-1000}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench-startup: $*" >&2; exit 1; }
say() { echo "bench-startup: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"; RUNS=$2; shift ;;
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
keel_release "up"
WORK=$(mktemp -d /tmp/keel-bench-startup-XXXXXX)
LOAD="python3 $ROOT/scripts/lib/kube_load.py"

now_ms() { date +%s%3N; }

# ready PORT NAME : waits until https://127.0.0.1:PORT/readyz says ok (NAME must stay up).
ready() {
    local port=$1 name=$2
    for _ in $(seq 12000); do
        kill -0 "${PID[$name]}" 2>/dev/null || die "$name exited during startup (see $WORK)"
        [[ $(curl -sk --max-time 1 "https://127.0.0.1:$port/readyz" 2>/dev/null) == ok ]] && return 0
        sleep 0.005
    done
    die "$name not ready after 60 s"
}

# launch STACK DIR PORTS... : starts the stack's processes (no waiting) on fixed ports.
launch() {
    local stack=$1 dir=$2 sport=$3 cport=$4 pport=$5
    if [[ $stack == up ]]; then
        "$KEEL" up --data-dir "$dir/keel.data" --secure-port "$sport" \
            --listen-client-urls "http://127.0.0.1:$cport" \
            --listen-peer-urls "http://127.0.0.1:$pport" >>"$dir/up.log" 2>&1 &
        PID[apiserver]=$!
    else
        "$ETCD" --name bench --data-dir "$dir/etcd" \
            --listen-client-urls "http://127.0.0.1:$cport" \
            --advertise-client-urls "http://127.0.0.1:$cport" \
            --listen-peer-urls "http://127.0.0.1:$pport" \
            --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
            --initial-cluster "bench=http://127.0.0.1:$pport" >>"$dir/etcd.log" 2>&1 &
        PID[etcd]=$!
        # As envtest does: the API server once the store answers.
        for _ in $(seq 12000); do
            curl -s --max-time 1 "http://127.0.0.1:$cport/health" 2>/dev/null | grep -q true && break
            sleep 0.005
        done
        "$KEEL" apiserver --etcd-servers "http://127.0.0.1:$cport" --bind-address 127.0.0.1 \
            --secure-port "$sport" --cert-dir "$dir/certs" >>"$dir/apiserver.log" 2>&1 &
        PID[apiserver]=$!
    fi
}

kubeconfig_of() {
    if [[ $1 == up ]]; then echo "$2/keel.data/kubeconfig"; else echo "$2/certs/kubeconfig"; fi
}

stack_ticks() { echo $(( $(ticks apiserver) + $(ticks etcd) )); }

# measure STACK RUN : one measurement; prints "empty_ms filled_ms rate p50 p99 errors cpu_us".
measure() {
    local stack=$1 dir="$WORK/$1-$2" sport cport pport start empty filled
    mkdir -p "$dir"
    sport=$(free_port); cport=$(free_port); pport=$(free_port)
    start=$(now_ms)
    launch "$stack" "$dir" "$sport" "$cport" "$pport"
    ready "$sport" apiserver
    empty=$(( $(now_ms) - start ))
    local kc
    kc=$(kubeconfig_of "$stack" "$dir")
    say "$stack: ready in $empty ms; writing $FILL ConfigMaps"
    $LOAD "$kc" fill "$FILL"
    stop_stack
    start=$(now_ms)
    launch "$stack" "$dir" "$sport" "$cport" "$pport"
    ready "$sport" apiserver
    filled=$(( $(now_ms) - start ))
    say "$stack: ready with $FILL objects in $filled ms; applying $APPLY custom resources"
    $LOAD "$kc" crd
    local before after result
    before=$(stack_ticks)
    result=$($LOAD "$kc" apply "$APPLY" "$RATE")
    after=$(stack_ticks)
    stop_stack
    python3 - "$result" "$empty" "$filled" "$before" "$after" "$CLK_TCK" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
empty, filled, before, after, hz = map(float, sys.argv[2:])
cpu_us = (after - before) / hz * 1e6 / max(r["done"], 1)
print(int(empty), int(filled), r["rate"], r["p50_ms"], r["p99_ms"], r["errors"], round(cpu_us))
if r["errors"]:
    print("first error:", r["first_error"], file=sys.stderr)
EOF
}

declare -A RESULTS=()
for run in $(seq "$RUNS"); do
    if (( run % 2 )); then order="up on-etcd"; else order="on-etcd up"; fi
    for stack in $order; do
        RESULTS[$stack]+="$(measure "$stack" "$run")"$'\n'
    done
done

python3 - "${RESULTS[up]}" "${RESULTS[on-etcd]}" "$RUNS" "$FILL" "$APPLY" "$RATE" "$ETCD_VERSION" <<'EOF'
import statistics, sys
up, on, runs, fill, apply, rate, etcd = sys.argv[1:]
def rows(text):
    return [list(map(float, l.split())) for l in text.strip().splitlines()]
up, on = rows(up), rows(on)
med = lambda rs, i: statistics.median(r[i] for r in rs)
names = ["start-to-ready, empty (ms)", f"start-to-ready, {int(fill):,} objects (ms)",
         f"custom resources applied/s (asked {rate})", "apply p50 (ms)", "apply p99 (ms)",
         "apply errors", "CPU per apply (µs, whole stack)"]
print(f"{runs} run(s), medians; etcd {etcd}; {int(apply):,} server-side applies with a CEL rule\n")
print(f"| metric | keel up | etcd + keel apiserver | up / etcd+apiserver |")
print("|---|---|---|---|")
for i, name in enumerate(names):
    a, b = med(up, i), med(on, i)
    ratio = f"{a / b:.2f}" if b else "-"
    print(f"| {name} | {a:g} | {b:g} | {ratio} |")
EOF
