#!/usr/bin/env bash
# Measures an event flood through the apiserver with and without `keel up --events-store`, and what
# it does to node heartbeats (issue 20). For each setup, a fresh `keel up` (a new data folder, the
# release binary; see scripts/lib/stacks.sh) takes two `keel sim nodes` runs of NODES nodes renewing
# their leases every 10 s (the kubelet's interval), one after the other, each for DURATION:
#   idle  : the nodes alone: the lease renewal p99 at rest;
#   flood : the same nodes and WRITERS event writers creating core/v1 Events (about 500 bytes, as a
#           kubelet reports them) as fast as the apiserver answers them (a closed loop): the most
#           events/s it accepts from them, and the renewal p99 under the flood.
# Setups: `up` (events in the main store, beside the leases) and `events-store` (`keel up
# --events-store`: events in a second store of their own, with its own WAL and apply queue).
#
# Prints a markdown table: events/s accepted, event POST p99 (first send to answer, Retry-After
# waits included), renewal p99 idle and under the flood and their ratio, 429s and errors (events /
# nodes; errors are any other failure, 5xx and timeouts included, and events still refused after
# client-go's 10 retries). The split HOLDS when, with --events-store, the renewal p99 under the
# flood is at most twice its idle value (and no request failed); the script says whether it holds.
# The simulator and its writers share the machine's cores with the server, as in the other
# benchmarks: read the ratio, not the absolute figures.
#
# Usage: scripts/bench-events-store.sh [--nodes 2000] [--duration 3m] [--writers 64]
#                                      [--setups "up events-store"] [--no-build] [--keep]
# Environment: SIM_EXTRA_ARGS is appended to each `keel sim nodes`, UP_EXTRA_ARGS to each `keel up`.
# The keel binary is $CARGO_TARGET_DIR/release/keel (target/release/keel without CARGO_TARGET_DIR).
set -euo pipefail

NODES=2000
DURATION=3m
WRITERS=64
SETUPS="up events-store"
BUILD=1
KEEP=0

SCRIPT=bench-events-store
# shellcheck source=lib/cli.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cli.sh"
declare -A FLAGS=([--nodes]=NODES [--duration]=DURATION [--writers]=WRITERS [--setups]=SETUPS)
parse_flags "$@"
[[ "$NODES" =~ ^[1-9][0-9]*$ ]] || die "not a node count: $NODES"
[[ "$WRITERS" =~ ^[1-9][0-9]*$ ]] || die "not a writer count: $WRITERS"
for setup in $SETUPS; do
    [[ "$setup" == up || "$setup" == events-store ]] || die "unknown setup: $setup"
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=lib/stacks.sh
source "$ROOT/scripts/lib/stacks.sh"
keel_release "sim nodes"
[[ "$("$KEEL" sim nodes --help)" == *--event-writers* ]] || die "'$KEEL sim nodes' has no --event-writers"
# A flood writes gigabytes of event history between two compactions: etcd's largest advised quota
# (8 GiB) keeps the NOSPACE alarm out of the measurement, in both stores.
BASE_UP_ARGS="--quota-backend-bytes 8589934592 ${UP_EXTRA_ARGS:-}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-events-store.XXXXXX")
RESULTS="$WORK/results.tsv"
: >"$RESULTS"

# phase SETUP PHASE [SIM ARGS...] : one `keel sim nodes` run against the running `keel up`; its
# JSON summary's figures go to RESULTS.
phase() {
    local setup=$1 name=$2 out="$WORK/$1-$2.json" rc=0
    shift 2
    say "$setup, $name: $NODES nodes renewing every 10 s for $DURATION${*:+ ($*)}"
    # shellcheck disable=SC2086 # the extra args are meant to be word-split
    "$KEEL" sim nodes --kubeconfig "$KUBECONFIG_OF" --count "$NODES" --duration "$DURATION" \
        --json "$@" ${SIM_EXTRA_ARGS:-} >"$out" 2>"$WORK/$setup-$name.log" || rc=$?
    if [[ "$(head -c 1 "$out")" != "{" ]]; then
        say "  failed (exit $rc): $(tail -c 300 "$WORK/$setup-$name.log")"
        printf '%s\t%s\tfailed\t1\n' "$setup" "$name" >>"$RESULTS"
        return 0
    fi
    python3 - "$out" "$setup" "$name" "$RESULTS" <<'PY'
import json, sys
out, setup, name, path = sys.argv[1:5]
r = json.loads(open(out).read())
keys = ("renewals_per_s", "p99_ms", "throttled", "errors", "events_created", "events_per_s",
        "events_p99_ms", "events_throttled", "events_errors")
with open(path, "a") as f:
    for k in keys:
        f.write(f"{setup}\t{name}\t{k}\t{r[k]}\n")
line = f"  {r['renewals_per_s']:.0f} renewals/s, p99 {r['p99_ms']:.1f} ms, 429s {r['throttled']}, errors {r['errors']}"
if r["event_writers"]:
    line += (f"; {r['events_per_s']:.0f} events/s, p99 {r['events_p99_ms']:.1f} ms, "
             f"429s {r['events_throttled']}, errors {r['events_errors']}")
print(line, file=sys.stderr)
for message, n in list(r["error_messages"].items()) + list(r["events_error_messages"].items()):
    print(f"    {n} {message}", file=sys.stderr)
PY
}

for setup in $SETUPS; do
    UP_EXTRA_ARGS=$BASE_UP_ARGS
    if [[ $setup == events-store ]]; then
        events_urls="--events-listen-client-urls http://127.0.0.1:$(free_port)"
        events_urls+=" --events-listen-peer-urls http://127.0.0.1:$(free_port)"
        UP_EXTRA_ARGS="--events-store $events_urls $BASE_UP_ARGS"
    fi
    start_stack up "$WORK/$setup"
    phase "$setup" idle
    phase "$setup" flood --event-writers "$WRITERS"
    stop_stack
done

# --- table ----------------------------------------------------------------------------------
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
KEEL_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$RESULTS" "$NODES" "$DURATION" "$WRITERS" "$KEEL_REV" "$(nproc)" "$CPU" <<'PY'
import sys
path, nodes, duration, writers, keel_rev, cores, cpu = sys.argv[1:8]
cells, setups = {}, []
for line in open(path):
    setup, phase, metric, value = line.rstrip("\n").split("\t")
    if setup not in setups:
        setups.append(setup)
    cells[(setup, phase, metric)] = float(value)
names = {"up": "keel up", "events-store": "keel up --events-store"}
print(f"keel {keel_rev}: `keel sim nodes`, {int(nodes):,} nodes renewing every 10 s, {duration} per phase "
      f"(idle: the nodes alone; flood: the nodes and {writers} event writers as fast as the apiserver "
      f"answers), against a fresh `keel up` per setup, simulator and server on the same {cores} cores "
      f"({cpu}).")
print()
print("| setup | events/s accepted ↑ | event POST p99 (ms ↓) | renewal p99 idle (ms) | renewal p99 under flood (ms ↓) "
      "| flood / idle (↓, holds ≤ 2) | 429s (events / nodes) | errors (events / nodes; must be 0) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
verdicts = []
for s in setups:
    get = lambda phase, metric: cells.get((s, phase, metric))
    if get("idle", "failed") or get("flood", "failed"):
        print(f"| {names[s]} | fail | fail | fail | fail | fail | fail | fail |")
        verdicts.append((s, None))
        continue
    idle, flood = get("idle", "p99_ms"), get("flood", "p99_ms")
    ratio = flood / idle if idle else float("inf")
    node_errors = int(get("idle", "errors") + get("flood", "errors"))
    event_errors = int(get("flood", "events_errors"))
    print(f"| {names[s]} | {get('flood', 'events_per_s'):,.0f} | {get('flood', 'events_p99_ms'):,.1f} "
          f"| {idle:,.1f} | {flood:,.1f} | {ratio:.2f}× "
          f"| {int(get('flood', 'events_throttled')):,} / {int(get('idle', 'throttled') + get('flood', 'throttled')):,} "
          f"| {event_errors:,} / {node_errors:,} |")
    verdicts.append((s, ratio <= 2.0 and node_errors == 0 and event_errors == 0))
print()
for s, held in verdicts:
    if s != "events-store":
        continue
    verdict = "not measured (a run failed)" if held is None else ("holds" if held else "does not hold")
    print(f"Target (with --events-store, renewal p99 under the flood at most 2× idle, no errors): {verdict}")
PY
