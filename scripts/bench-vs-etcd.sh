#!/usr/bin/env bash
# Compares `keel store` with a real etcd 3.5.1 side by side, on this machine, in one run.
#
# Both servers get the same etcd flags, their own ports and their own data directory under one
# temporary folder (same disk). Every test runs `keel bench` against both servers, alternating which goes first by run.
#   put / txn-put : --conns 8 --clients 64, 8-byte keys, 256-byte values, 100k-key space
#   range l / s   : `range foo`, linearizable and serializable, same conns/clients
#   memory        : fresh servers, VmRSS idle, load 1M sequential keys of 256 B, count them
#                   (each server must hold exactly the keys loaded), VmRSS again. Target: keel's
#                   VmRSS with 1M keys at most 0.5x etcd's (medians over the runs); the script
#                   prints `Target (...): met` or `NOT met` and exits 1 when not met (or when
#                   a load failed, so there is nothing to compare). Not judged with --quick
#                   (100k keys) or --skip-keel.
#   watch         : fresh servers; memory per stream and per idle watcher (VmRSS before/after
#                   opening 100 streams x 100 watchers, divided); then 10,000 watchers (100 streams
#                   x 100) on one key prefix receive every event of puts offered at 1,000/s
#                   (same conns/clients put): events lost and duplicated (must be 0), p99 delivery latency
#                   (put sent -> event received), events/s delivered, puts/s achieved
#   lease         : lease keepalive throughput and p99, same conns/clients, one stream per client
#   cluster       : a 3-member etcd cluster, then a 3-member keel cluster (one at a time, same
#                   flags, election timeout 1 s): put and txn-put (same conns/clients, spread over
#                   the members; followers forward to the leader), then kill -9 the leader and
#                   time until a put through a survivor succeeds (failover)
#   compact       : fresh servers (8 GiB quota); COMPACT_KEYS keys x COMPACT_REVS revisions of
#                   64-byte values written by txns of 100 puts, then `keel bench compact`: puts
#                   and single-key ranges (same conns/clients, half each) for 5 s, then one
#                   physical Compact to the latest revision under that load; p99 of each during
#                   the compaction, and how long the compaction took
#   snapshot      : fresh servers, load 1M sequential keys of 256 B; `etcdctl snapshot save` from
#                   each server (the Snapshot RPC alone: time, the server's VmRSS growth while
#                   it streams); each project's own tools: `etcdctl snapshot save` and `etcdutl
#                   snapshot restore` on etcd, `keel snapshot save --etcd-servers` and `keel
#                   snapshot restore` (a billion-revision bump, marked compacted) on keel: wall
#                   time and the tool's peak RSS (GNU time); then a server started on each
#                   restored folder must serve every key loaded
# Every row also gets the server's CPU per request: utime + stime of the server process (all
# members for the cluster rows) from /proc/PID/stat over the benchmark, divided by the requests
# it answered (events delivered for watch), in µs; independent of the load generator's speed.
# Prints a markdown table (test | etcd | keel | keel/etcd | CPU/request etcd | keel | keel/etcd)
# ready to paste into a README.
#
# Usage: scripts/bench-vs-etcd.sh [--quick] [--runs N] [--only LIST] [--skip-keel] [--no-build] [--keep]
#   --quick      totals 10x smaller (smoke run; the watch test puts 500 times instead of 2,000)
#   --only LIST  run only these groups, comma separated: kv (put, txn-put, range), memory, watch,
#                lease, cluster, compact, snapshot (default: all); e.g. --only watch,lease
#   --runs N     repeat everything N times and report medians (default 1)
#   --skip-keel  benchmark etcd only (also: SKIP_KEEL=1)
#   --no-build   use the binaries already in target/release
#   --keep       keep the temporary folder (server logs, raw results)
# Environment: ETCD_EXTRA_ARGS / KEEL_EXTRA_ARGS are appended to each server's command line;
# CONNS / CLIENTS override 8 / 64; WATCH_STREAMS / WATCH_PER_STREAM / WATCH_RATE / WATCH_PUTS /
# WATCH_PUT_CLIENTS override 100 / 100 / 1000 / 2000 (500 with --quick) / CLIENTS; COMPACT_KEYS /
# COMPACT_REVS override 2,000,000 (200,000 with --quick) / 5; KEEL_SERVER replaces the `target/release/keel store` command
# in the keel column (e.g. another etcd-compatible server, or an etcd to check this script).
set -euo pipefail

QUICK=0
RUNS=1
SKIP_KEEL=${SKIP_KEEL:-0}
BUILD=1
KEEP=0
CONNS=${CONNS:-8}
CLIENTS=${CLIENTS:-64}
ONLY=kv,memory,watch,lease,cluster,compact,snapshot

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench-vs-etcd: $*" >&2; exit 1; }
say() { echo "bench-vs-etcd: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --runs) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"; RUNS=$2; shift ;;
        --runs=*) RUNS=${1#--runs=}; [[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number" ;;
        --only) [[ $# -ge 2 ]] || die "--only needs a list (kv,memory,watch,lease,cluster,compact,snapshot)"; ONLY=$2; shift ;;
        --only=*) ONLY=${1#--only=} ;;
        --skip-keel) SKIP_KEEL=1 ;;
        --no-build) BUILD=0 ;;
        --keep) KEEP=1 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
    shift
done

for group in ${ONLY//,/ }; do
    case "$group" in
        kv|memory|watch|lease|cluster|compact|snapshot) ;;
        *) die "--only: unknown group '$group' (expected kv, memory, watch, lease, cluster, compact, snapshot)" ;;
    esac
done
# wants GROUP : whether --only selected GROUP.
wants() { [[ ",$ONLY," == *",$1,"* ]]; }

TOTAL=100000
LOAD=1000000
WATCH_PUTS=${WATCH_PUTS:-2000}
COMPACT_KEYS=${COMPACT_KEYS:-2000000}
COMPACT_REVS=${COMPACT_REVS:-5}
if [[ $QUICK == 1 ]]; then
    TOTAL=$((TOTAL / 10))
    LOAD=$((LOAD / 10))
    WATCH_PUTS=${WATCH_PUTS_QUICK:-500}
    COMPACT_KEYS=$((COMPACT_KEYS / 10))
fi
WATCH_STREAMS=${WATCH_STREAMS:-100}
WATCH_PER_STREAM=${WATCH_PER_STREAM:-100}
WATCH_RATE=${WATCH_RATE:-1000}
WATCH_PUT_CLIENTS=${WATCH_PUT_CLIENTS:-$CLIENTS}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
KEEL="$ROOT/target/release/keel"

# --- binaries -------------------------------------------------------------------------------
if [[ $BUILD == 1 ]]; then
    say "building keel (release)"
    if ! cargo build --release -p keel >&2; then
        # With --skip-keel only the load generator is needed, and it has a fallback below.
        [[ $SKIP_KEEL == 1 ]] || die "cargo build --release -p keel failed"
        say "building keel failed; continuing without it (--skip-keel)"
    fi
fi
[[ -x "$KEEL" || $SKIP_KEEL == 1 || -n "${KEEL_SERVER:-}" ]] || die "$KEEL not found (run without --no-build)"

if [[ -x "$KEEL" ]] && "$KEEL" bench watch --help >/dev/null 2>&1 &&
    "$KEEL" bench lease-keepalive --help >/dev/null 2>&1; then
    BENCH=("$KEEL" bench)
else
    # `keel bench` (with watch and lease-keepalive) not in this binary: the same crate as a
    # standalone example.
    say "'keel bench watch' is not available in $KEEL; using the keel-bench example binary"
    if [[ $BUILD == 1 ]]; then
        cargo build --release -p keel-bench --example bench >&2
    fi
    BENCH=("$ROOT/target/release/examples/bench")
    [[ -x "${BENCH[0]}" ]] || die "${BENCH[0]} not found (run without --no-build)"
fi

if [[ $SKIP_KEEL == 0 && -z "${KEEL_SERVER:-}" ]] && ! "$KEEL" store --help >/dev/null 2>&1; then
    die "'$KEEL store' is not available; pass --skip-keel to benchmark etcd alone"
fi

# shellcheck source=lib/stacks.sh
source "$ROOT/scripts/lib/stacks.sh"
ETCDCTL="$ETCD_PKG/etcdbin/etcdctl"
ETCDUTL="$ETCD_PKG/etcdbin/etcdutl"

# --- servers --------------------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-vs-etcd.XXXXXX")
RESULTS="$WORK/results.tsv"
: >"$RESULTS"
declare -A EP=()

# launch NAME DIR CPORT PPORT INITIAL_CLUSTER CMD... : starts one member in the background with
# etcd's flags on 127.0.0.1 (data and log in DIR); records its PID and endpoint.
launch() {
    local name=$1 dir=$2 cport=$3 pport=$4 initial=$5
    shift 5
    mkdir -p "$dir"
    "$@" --name "$name" --data-dir "$dir/data" \
        --listen-client-urls "http://127.0.0.1:$cport" \
        --advertise-client-urls "http://127.0.0.1:$cport" \
        --listen-peer-urls "http://127.0.0.1:$pport" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "$initial" \
        >"$dir/log" 2>&1 &
    PID[$name]=$!
    EP[$name]="127.0.0.1:$cport"
}

# start_server NAME TAG CMD... : starts a single-member server with etcd's flags, waits for it.
start_server() {
    local name=$1 tag=$2
    shift 2
    local cport pport dir="$WORK/$name-$tag"
    cport=$(free_port)
    pport=$(free_port)
    launch "$name" "$dir" "$cport" "$pport" "$name=http://127.0.0.1:$pport" "$@"
    await_server "$name" "$dir"
}

# await_server NAME DIR : waits until the server NAME launched in DIR answers.
await_server() {
    local name=$1 dir=$2 i
    for i in $(seq 120); do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            tail -n 20 "$dir/log" >&2
            die "$name exited during startup (log: $dir/log)"
        fi
        if grep -q 'ready to serve client requests' "$dir/log" 2>/dev/null ||
            ETCDCTL_API=3 "$ETCDCTL" --endpoints "${EP[$name]}" --dial-timeout 1s \
                endpoint health >/dev/null 2>&1 ||
            "${BENCH[@]}" --endpoints "${EP[$name]}" --dial-timeout 1s --json \
                range health --total 1 >/dev/null 2>&1; then
            say "$name ready on ${EP[$name]} (pid ${PID[$name]}, data $dir/data)"
            return 0
        fi
        sleep 0.5
    done
    tail -n 20 "$dir/log" >&2
    die "$name not ready after 60 s (log: $dir/log)"
}

SERVERS=(etcd)
[[ $SKIP_KEEL == 0 ]] && SERVERS+=(keel)

# start_cluster NAME TAG CMD... : starts a 3-member cluster (members NAME-0..2, endpoints of all
# in EP[NAME]), each with etcd's flags and a 1 s election timeout; waits for a leader.
start_cluster() {
    local name=$1 tag=$2
    shift 2
    local i initial="" cports=() pports=()
    for i in 0 1 2; do
        cports+=("$(free_port)")
        pports+=("$(free_port)")
        initial+="${initial:+,}$name-$i=http://127.0.0.1:${pports[$i]}"
    done
    EP[$name]=""
    for i in 0 1 2; do
        launch "$name-$i" "$WORK/$name-$tag-$i" "${cports[$i]}" "${pports[$i]}" "$initial" \
            "$@" --initial-cluster-state new --heartbeat-interval 100 --election-timeout 1000
        EP[$name]+="${EP[$name]:+,}${EP[$name-$i]}"
    done
    for _ in $(seq 120); do
        if "${BENCH[@]}" --endpoints "${EP[$name]}" --dial-timeout 1s --json \
            put --total 1 >/dev/null 2>&1; then
            say "$name cluster ready on ${EP[$name]}"
            return 0
        fi
        sleep 0.5
    done
    die "$name cluster not ready after 60 s (logs: $WORK/$name-$tag-*/log)"
}

stop_cluster() {
    local i
    for i in 0 1 2; do stop_server "$1-$i"; done
}

# failover NAME RUN : kill -9 the leader of cluster NAME, time until a put through a survivor
# succeeds; recorded as the "failover" test in seconds.
failover() {
    local name=$1 run=$2 i leader="" survivors=() t0 t1
    for i in 0 1 2; do
        if ETCDCTL_API=3 "$ETCDCTL" --endpoints "${EP[$name-$i]}" endpoint status -w json 2>/dev/null |
            python3 -c 'import json,sys; s=json.load(sys.stdin)[0]["Status"]; sys.exit(0 if s["leader"] == s["header"]["member_id"] else 1)'; then
            leader=$i
        else
            survivors+=("${EP[$name-$i]}")
        fi
    done
    [[ -n "$leader" ]] || { say "run $run: $name: no leader found"; record failover "$name" value fail; return 0; }
    say "run $run: failover of $name (killing $name-$leader)"
    t0=$(date +%s.%N)
    kill -9 "${PID[$name-$leader]}"
    wait "${PID[$name-$leader]}" 2>/dev/null || true
    for _ in $(seq 600); do
        if ETCDCTL_API=3 "$ETCDCTL" --endpoints "$(IFS=,; echo "${survivors[*]}")" \
            --command-timeout 1s put failover-probe v >/dev/null 2>&1; then
            t1=$(date +%s.%N)
            record failover "$name" value "$(python3 -c "print($t1 - $t0)")"
            say "  first write $(python3 -c "print(round($t1 - $t0, 2))") s after the kill"
            return 0
        fi
        sleep 0.02
    done
    record failover "$name" value fail
}

start_all() {
    local tag=$1
    # shellcheck disable=SC2086 # the extra args are meant to be word-split
    start_server etcd "$tag" "$ETCD" ${ETCD_EXTRA_ARGS:-}
    if [[ $SKIP_KEEL == 0 ]]; then
        # shellcheck disable=SC2086
        start_server keel "$tag" ${KEEL_SERVER:-"$KEEL" store} ${KEEL_EXTRA_ARGS:-}
    fi
}

stop_all() {
    local name
    for name in "${SERVERS[@]}"; do stop_server "$name"; done
}

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"; }

CLK_TCK=$(getconf CLK_TCK)
# cpu_ticks SERVER : utime + stime (clock ticks) of a server's process, or of every member of
# a cluster named SERVER; fields 14 and 15 of /proc/PID/stat, counted after the ")" of comm.
cpu_ticks() {
    local name=$1 pids=() pid total=0 ticks
    if [[ -n "${PID[$name]:-}" ]]; then
        pids=("${PID[$name]}")
    else
        for pid in 0 1 2; do [[ -n "${PID[$name-$pid]:-}" ]] && pids+=("${PID[$name-$pid]}"); done
    fi
    for pid in "${pids[@]}"; do
        ticks=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}') || ticks=0
        total=$((total + ${ticks:-0}))
    done
    echo "$total"
}

# record_cpu TEST SERVER TICKS_BEFORE REQUESTS : the server's CPU per request since
# TICKS_BEFORE, in µs, as the metric cpu_us.
record_cpu() {
    local test=$1 server=$2 before=$3 requests=$4 after
    after=$(cpu_ticks "$server")
    [[ "$requests" =~ ^[0-9]+$ && "$requests" -gt 0 ]] || return 0
    record "$test" "$server" cpu_us "$(python3 -c "print(($after - $before) / $CLK_TCK * 1e6 / $requests)")"
}

# requests JSON : the requests a `keel bench --json` report counts (all phases for compact).
requests() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(int(r.get("requests_all", r.get("total", 0))))' "$1"; }

# bench RUN TEST SERVER ARGS... : one `keel bench` run, throughput and p99 into the results.
bench() {
    local run=$1 test=$2 server=$3
    shift 3
    local out rc=0 ticks
    say "run $run: $test against $server"
    ticks=$(cpu_ticks "$server")
    out=$(timeout 1800 "${BENCH[@]}" --endpoints "${EP[$server]}" --json "$@" \
        2>>"$WORK/bench-stderr.log") || rc=$?
    if [[ $rc != 0 || -z "$out" ]]; then
        say "  failed (exit $rc): $(tail -n 3 "$WORK/bench-stderr.log" | tr '\n' ' ')"
        record "$test" "$server" throughput fail
        record "$test" "$server" p99 fail
        return 0
    fi
    record_cpu "$test" "$server" "$ticks" "$(requests "$out")"
    echo "$out" >>"$WORK/bench.jsonl"
    python3 - "$out" "$test" "$server" "$RESULTS" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); test, server, path = sys.argv[2:5]
with open(path, "a") as f:
    for metric, value in (("throughput", r["throughput"]), ("p99", r["p99_ms"]), ("errors", r["errors"])):
        f.write(f"{test}\t{server}\t{metric}\t{value}\n")
print(f"  {r['throughput']:.0f} req/s, p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
      f"{r['errors']} errors", file=sys.stderr)
PY
}

# bench_fields RUN TEST SERVER "FIELD..." ARGS... : one `keel bench` run; each named field of its
# JSON report goes into the results as a metric of that name. A run that exits non-zero but
# printed its report (a watch run that lost events) still counts: the report says what failed.
bench_fields() {
    local run=$1 test=$2 server=$3 fields=$4
    shift 4
    local out rc=0 field ticks
    say "run $run: $test against $server"
    ticks=$(cpu_ticks "$server")
    out=$(timeout 3600 "${BENCH[@]}" --endpoints "${EP[$server]}" --json "$@" \
        2>>"$WORK/bench-stderr.log") || rc=$?
    if [[ "$out" != "{"* ]]; then
        say "  failed (exit $rc): $(tail -n 3 "$WORK/bench-stderr.log" | tr '\n' ' ')"
        for field in $fields; do record "$test" "$server" "$field" fail; done
        return 0
    fi
    record_cpu "$test" "$server" "$ticks" "$(requests "$out")"
    [[ $rc == 0 ]] || say "  exit $rc: $(tail -n 1 "$WORK/bench-stderr.log")"
    echo "$out" >>"$WORK/bench.jsonl"
    python3 - "$out" "$test" "$server" "$RESULTS" $fields <<'PY'
import json, sys
r = json.loads(sys.argv[1]); test, server, path = sys.argv[2:5]
with open(path, "a") as f:
    for field in sys.argv[5:]:
        f.write(f"{test}\t{server}\t{field}\t{r.get(field, 'fail')}\n")
print("  " + ", ".join(f"{k} {r.get(k)}" for k in sys.argv[5:]), file=sys.stderr)
PY
}

# rss SERVER KEY : VmRSS (or RssAnon) of a server in MiB, from /proc/PID/status.
rss() {
    awk -v key="$2:" '$1 == key {printf "%.1f", $2 / 1024}' "/proc/${PID[$1]}/status"
}

# count_keys SERVER : how many keys the server holds (all of them), or "fail". etcdctl 3.5
# prints a count only with `-w fields` (`"Count" : N`).
count_keys() {
    local out count
    out=$(ETCDCTL_API=3 "$ETCDCTL" --endpoints "${EP[$1]}" --command-timeout 120s \
        get '' --from-key --count-only -w fields 2>>"$WORK/bench-stderr.log") || { echo fail; return 0; }
    count=$(awk '$1 == "\"Count\"" {print $3}' <<<"$out")
    [[ "$count" =~ ^[0-9]+$ ]] && echo "$count" || echo fail
}

# timed "TEST..." SERVER CMD... : runs CMD (a snapshot tool) once under GNU time: its wall
# time (time_s) and peak RSS (tool_mib), and the growth of SERVER's VmRSS while it runs over its
# lowest value (server_mib, sampled every 100 ms), recorded under each TEST. A failed CMD
# records fail.
timed() {
    local tests=$1 server=$2
    shift 2
    local out="$WORK/timed-${tests// /-}-$server" status="/proc/${PID[$server]}/status" sampler
    local rc=0 secs kib grew test
    say "${tests%% *} against $server: $*"
    (while :; do awk '$1 == "VmRSS:" {print $2}' "$status" 2>/dev/null; sleep 0.1; done) >"$out.rss" &
    sampler=$!
    /usr/bin/time -f '%e %M' -o "$out.time" "$@" >>"$WORK/snapshot-tools.log" 2>&1 || rc=$?
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    if [[ $rc != 0 ]]; then
        say "  failed (exit $rc): $(tail -n 3 "$WORK/snapshot-tools.log" | tr '\n' ' ')"
        for test in $tests; do
            record "$test" "$server" time_s fail
            record "$test" "$server" tool_mib fail
        done
        return 0
    fi
    read -r secs kib <"$out.time"
    grew=$(sort -n "$out.rss" | awk 'NR == 1 {lo = $1} {hi = $1} END {print (hi - lo) / 1024}')
    for test in $tests; do
        record "$test" "$server" time_s "$secs"
        record "$test" "$server" tool_mib "$((kib / 1024))"
        record "$test" "$server" server_mib "$grew"
    done
    say "  ${secs} s, tool peak RSS $((kib / 1024)) MiB, server VmRSS +${grew} MiB"
}

# mib FILE : the size of FILE in MiB.
mib() { python3 -c "import os, sys; print(os.path.getsize(sys.argv[1]) / 2**20)" "$1"; }

# snapshot_round RUN SERVER : saves SERVER's keys with etcdctl and with its project's tool,
# restores them with its project's tool, starts a server on the restored folder and counts the
# keys it serves.
snapshot_round() {
    local run=$1 server=$2 dir="$WORK/snapshot-$2-$1" file backup restored cport pport
    mkdir -p "$dir"
    # etcd's own save is this etcdctl run.
    local tests=snap-rpc
    [[ $server == etcd ]] && tests="snap-rpc snap-save"
    timed "$tests" "$server" env ETCDCTL_API=3 "$ETCDCTL" --endpoints "${EP[$server]}" \
        --command-timeout 600s snapshot save "$dir/etcdctl.db"
    cport=$(free_port)
    pport=$(free_port)
    restored="$WORK/restored-$server-$run"
    local member=(--name restored --initial-cluster "restored=http://127.0.0.1:$pport"
        --initial-advertise-peer-urls "http://127.0.0.1:$pport")
    if [[ $server == etcd ]]; then
        file="$dir/etcdctl.db"
        timed snap-restore etcd "$ETCDUTL" snapshot restore "$file" --data-dir "$restored/data" "${member[@]}"
    else
        backup="$dir/backup"
        timed snap-save keel "$KEEL" snapshot save "$backup" --etcd-servers "http://${EP[keel]}"
        file="$backup/main.db"
        timed snap-restore keel "$KEEL" snapshot restore "$backup" --data-dir "$restored/folder" "${member[@]}"
        mv "$restored/folder/main" "$restored/data" 2>/dev/null || true
    fi
    if [[ -f "$file" ]]; then record snap-save "$server" size_mib "$(mib "$file")"; fi
    if [[ -d "$restored/data" ]]; then
        if [[ $server == etcd ]]; then
            launch restored "$restored" "$cport" "$pport" "restored=http://127.0.0.1:$pport" "$ETCD"
        else
            launch restored "$restored" "$cport" "$pport" "restored=http://127.0.0.1:$pport" "$KEEL" store
        fi
        await_server restored "$restored"
        record snap-restore "$server" keys "$(count_keys restored)"
        stop_server restored
    else
        record snap-restore "$server" keys fail
    fi
    rm -rf "$dir" "$restored"
}

# order RUN : the servers in the order to benchmark them; odd runs start with etcd, even runs with
# keel, so neither always enjoys the warmer machine (use --runs 2 or more for a fair median).
order() {
    if (($1 % 2 == 1)); then
        echo "${SERVERS[@]}"
    else
        printf '%s\n' "${SERVERS[@]}" | tac | tr '\n' ' '
    fi
}

COMMON=(--conns "$CONNS" --clients "$CLIENTS")
WRITE=(--total "$TOTAL" --key-size 8 --val-size 256 --key-space-size 100000)

WATCH_FIELDS="lost duplicates p99_ms p50_ms throughput put_throughput errors"
COMPACT_FIELDS="compaction_s put_p99_ms range_p99_ms baseline_put_p99_ms baseline_range_p99_ms put_throughput range_throughput errors"
WATCH_SHAPE=(--streams "$WATCH_STREAMS" --watch-per-stream "$WATCH_PER_STREAM")

for run in $(seq "$RUNS"); do
    say "=== run $run of $RUNS ==="
    if wants kv; then
    start_all "run$run"
    for server in $(order "$run"); do bench "$run" put "$server" "${COMMON[@]}" put "${WRITE[@]}"; done
    for server in $(order "$run"); do bench "$run" txn-put "$server" "${COMMON[@]}" txn-put "${WRITE[@]}"; done
    for server in $(order "$run"); do
        bench "$run" range-l "$server" "${COMMON[@]}" range foo --consistency l --total "$TOTAL"
    done
    for server in $(order "$run"); do
        bench "$run" range-s "$server" "${COMMON[@]}" range foo --consistency s --total "$TOTAL"
    done
    stop_all
    fi

    # Memory: fresh servers, so both hold exactly the loaded keys and nothing else.
    if wants memory; then
    start_all "mem$run"
    sleep 2
    for server in $(order "$run"); do record rss-idle "$server" value "$(rss "$server" VmRSS)"; done
    for server in $(order "$run"); do
        bench "$run" load "$server" "${COMMON[@]}" put --total "$LOAD" --key-size 8 --val-size 256 \
            --key-space-size "$LOAD" --sequential-keys
    done
    for server in $(order "$run"); do
        # What the VmRSS below is of: the number of keys the server holds (a load that failed
        # part-way must not pass for a small footprint).
        record load "$server" keys "$(count_keys "$server")"
    done
    sleep 2
    for server in $(order "$run"); do
        record rss-loaded "$server" value "$(rss "$server" VmRSS)"
        record rss-anon "$server" value "$(rss "$server" RssAnon)"
        say "$server after $LOAD keys: VmRSS $(rss "$server" VmRSS) MiB, RssAnon $(rss "$server" RssAnon) MiB"
    done
    stop_all
    fi

    # Watch and lease: fresh servers. Idle watchers first (memory), then the delivery test.
    if wants watch || wants lease; then
    start_all "watch$run"
    if wants watch; then
        for server in $(order "$run"); do
            bench_fields "$run" watch-idle "$server" "bytes_per_watcher bytes_per_stream" \
                --conns "$CONNS" watch "${WATCH_SHAPE[@]}" --put-total 0 --server-pid "${PID[$server]}"
        done
        for server in $(order "$run"); do
            bench_fields "$run" watch "$server" "$WATCH_FIELDS" --conns "$CONNS" --clients "$WATCH_PUT_CLIENTS" \
                watch "${WATCH_SHAPE[@]}" --put-total "$WATCH_PUTS" --put-rate "$WATCH_RATE" \
                --key-size 8 --val-size 256 --key-space-size 1000 --sequential-keys
        done
    fi
    if wants lease; then
        for server in $(order "$run"); do
            bench_fields "$run" lease "$server" "throughput p99_ms errors" "${COMMON[@]}" \
                lease-keepalive --total "$TOTAL"
        done
    fi
    stop_all
    fi

    # Clusters: one 3-member cluster at a time, so the two never share the cores.
    if wants cluster; then
        for server in $(order "$run"); do
            if [[ $server == etcd ]]; then
                # shellcheck disable=SC2086
                start_cluster etcd "cluster$run" "$ETCD" ${ETCD_EXTRA_ARGS:-}
            else
                # shellcheck disable=SC2086
                start_cluster keel "cluster$run" ${KEEL_SERVER:-"$KEEL" store} ${KEEL_EXTRA_ARGS:-}
            fi
            bench "$run" cluster-put "$server" "${COMMON[@]}" put "${WRITE[@]}"
            bench "$run" cluster-txn-put "$server" "${COMMON[@]}" txn-put "${WRITE[@]}"
            failover "$server" "$run"
            stop_cluster "$server"
        done
    fi

    # Compaction: fresh servers with a large history, compacted in one go under load.
    if wants compact; then
        ETCD_EXTRA_ARGS_SAVED=${ETCD_EXTRA_ARGS:-}
        KEEL_EXTRA_ARGS_SAVED=${KEEL_EXTRA_ARGS:-}
        ETCD_EXTRA_ARGS="$ETCD_EXTRA_ARGS_SAVED --quota-backend-bytes 8589934592"
        KEEL_EXTRA_ARGS="$KEEL_EXTRA_ARGS_SAVED --quota-backend-bytes 8589934592"
        start_all "compact$run"
        ETCD_EXTRA_ARGS=$ETCD_EXTRA_ARGS_SAVED
        KEEL_EXTRA_ARGS=$KEEL_EXTRA_ARGS_SAVED
        for server in $(order "$run"); do
            bench "$run" compact-load "$server" "${COMMON[@]}" txn-put --txn-ops 100 \
                --key-size 8 --val-size 64 --key-space-size "$COMPACT_KEYS" \
                --total $((COMPACT_KEYS * COMPACT_REVS / 100))
        done
        for server in $(order "$run"); do
            bench_fields "$run" compact "$server" "$COMPACT_FIELDS" "${COMMON[@]}" compact \
                --key-size 8 --val-size 64 --key-space-size "$COMPACT_KEYS" --baseline 5s
        done
        stop_all
    fi

    # Snapshots: fresh servers holding exactly the loaded keys.
    if wants snapshot; then
        start_all "snap$run"
        for server in $(order "$run"); do
            bench "$run" snap-load "$server" "${COMMON[@]}" put --total "$LOAD" --key-size 8 \
                --val-size 256 --key-space-size "$LOAD" --sequential-keys
        done
        for server in $(order "$run"); do snapshot_round "$run" "$server"; done
        stop_all
    fi
done

# --- table ----------------------------------------------------------------------------------
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
FS=$(df -T "$WORK" | awk 'NR == 2 {print $1 " (" $2 ")"}')
KEEL_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$RESULTS" "$RUNS" "$TOTAL" "$LOAD" "$CONNS" "$CLIENTS" "$ETCD_VERSION" "$KEEL_REV" \
    "$(nproc)" "$CPU" "$FS" "$WATCH_STREAMS" "$WATCH_PER_STREAM" "$WATCH_RATE" "$WATCH_PUTS" \
    "$COMPACT_KEYS" "$COMPACT_REVS" "$ONLY" "$SKIP_KEEL" <<'PY'
import statistics, sys
from collections import defaultdict
path, runs, total, load, conns, clients, etcd_version, keel_rev, cores, cpu, fs = sys.argv[1:12]
w_streams, w_per, w_rate, w_puts, c_keys, c_revs = (int(x) for x in sys.argv[12:18])
only, skip_keel = sys.argv[18].split(","), sys.argv[19] == "1"
cells = defaultdict(list)
errors = defaultdict(int)
for line in open(path):
    test, server, metric, value = line.rstrip("\n").split("\t")
    if metric == "errors":
        if value != "fail":
            errors[(test, server)] += int(value)
    else:
        cells[(test, server, metric)].append(value)

def human(n):
    n = int(n)
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)

cc = f"{conns} conns × {clients} clients"
rows = [
    ("put", "throughput", f"put, {cc} (req/s ↑)", 0),
    ("put", "p99", "put p99 (ms ↓)", 2),
    ("txn-put", "throughput", f"txn-put, {cc} (req/s ↑)", 0),
    ("txn-put", "p99", "txn-put p99 (ms ↓)", 2),
    ("range-l", "throughput", f"range linearizable, {cc} (req/s ↑)", 0),
    ("range-l", "p99", "range linearizable p99 (ms ↓)", 2),
    ("range-s", "throughput", f"range serializable, {cc} (req/s ↑)", 0),
    ("range-s", "p99", "range serializable p99 (ms ↓)", 2),
    ("load", "throughput", f"load {human(load)} sequential keys (req/s ↑)", 0),
    ("load", "keys", "keys held after the load (must be the keys loaded)", 0),
    ("rss-idle", "value", "memory idle, VmRSS (MiB ↓)", 0),
    ("rss-loaded", "value", f"memory with {human(load)} keys × 256 B, VmRSS (MiB ↓)", 0),
    ("rss-anon", "value", f"memory with {human(load)} keys × 256 B, RssAnon (MiB ↓)", 0),
]
wk = f"{w_streams * w_per:,} watchers ({w_streams} streams × {w_per}) on one prefix, {w_rate:,} puts/s offered"
rows += [
    ("watch", "lost", f"watch: {wk}, events lost (must be 0)", 0),
    ("watch", "duplicates", "watch: duplicate events (must be 0)", 0),
    ("watch", "p99_ms", "watch: p99 delivery latency, put sent → event (ms ↓)", 1),
    ("watch", "p50_ms", "watch: p50 delivery latency (ms ↓)", 1),
    ("watch", "throughput", "watch: events delivered (events/s ↑)", 0),
    ("watch", "put_throughput", f"watch: puts achieved under the watch load (puts/s ↑, {w_rate:,} offered)", 0),
    ("watch-idle", "bytes_per_watcher", f"memory per idle watcher, VmRSS ({w_streams * w_per:,} watchers, B ↓)", 0),
    ("watch-idle", "bytes_per_stream", f"memory per watch stream, VmRSS ({w_streams} streams, B ↓)", 0),
    ("lease", "throughput", f"lease keepalive, {cc}, one stream per client (req/s ↑)", 0),
    ("lease", "p99_ms", "lease keepalive p99 (ms ↓)", 2),
    ("cluster-put", "throughput", f"3-member cluster: put, {cc} over the members (req/s ↑)", 0),
    ("cluster-put", "p99", "3-member cluster: put p99 (ms ↓)", 2),
    ("cluster-txn-put", "throughput", f"3-member cluster: txn-put, {cc} (req/s ↑)", 0),
    ("cluster-txn-put", "p99", "3-member cluster: txn-put p99 (ms ↓)", 2),
    ("failover", "value", "3-member cluster: leader kill -9 → first write accepted, election timeout 1 s (s ↓)", 2),
]
ck = f"{human(c_keys)} keys × {c_revs} revisions"
rows += [
    ("compact-load", "throughput", f"compaction: load {ck} in txns of 100 puts (txn/s ↑)", 0),
    ("compact", "compaction_s", f"compaction: physical Compact of {ck} under put+range load (s ↓)", 1),
    ("compact", "put_p99_ms", "compaction: put p99 during the compaction (ms ↓)", 2),
    ("compact", "range_p99_ms", "compaction: range p99 during the compaction (ms ↓)", 2),
    ("compact", "baseline_put_p99_ms", "compaction: put p99 before it, same load (ms ↓)", 2),
    ("compact", "baseline_range_p99_ms", "compaction: range p99 before it, same load (ms ↓)", 2),
    ("compact", "put_throughput", "compaction: puts during the compaction (req/s ↑)", 0),
    ("compact", "range_throughput", "compaction: ranges during the compaction (req/s ↑)", 0),
]

rows += [
    ("snap-rpc", "time_s", f"snapshot: `etcdctl snapshot save` of {human(load)} keys × 256 B from each server (s ↓)", 2),
    ("snap-rpc", "server_mib", "snapshot: the server's VmRSS growth while it streams (MiB ↓)", 0),
    ("snap-save", "time_s", "snapshot save with each project's tool: `etcdctl snapshot save` / `keel snapshot save` (s ↓)", 2),
    ("snap-save", "tool_mib", "snapshot save: the tool's peak RSS (MiB ↓)", 0),
    ("snap-save", "size_mib", "snapshot size (MiB ↓)", 0),
    ("snap-restore", "time_s", "snapshot restore: `etcdutl snapshot restore` / `keel snapshot restore` (s ↓)", 2),
    ("snap-restore", "tool_mib", "snapshot restore: the tool's peak RSS (MiB ↓)", 0),
    ("snap-restore", "keys", "keys served from the restored folder (must be the keys loaded)", 0),
]

def median(test, server, metric):
    values = cells.get((test, server, metric))
    if not values:
        return None
    if "fail" in values:
        return "fail"
    return statistics.median(float(v) for v in values)

def show(value, digits, test, server):
    if value is None:
        return "n/a"
    if value == "fail":
        return "fail"
    text = f"{value:,.{digits}f}"
    if server is not None and errors[(test, server)]:
        text += f" ({errors[(test, server)]} errors)"
    return text

print(f"keel {keel_rev} vs etcd {etcd_version}, single member each (3 in the cluster rows), same machine: {cores} cores "
      f"{cpu}, data on {fs}. `keel bench` with 8-byte keys, 256-byte values, "
      f"{human(total)} requests per test" + (f", medians of {runs} runs" if int(runs) > 1 else "") + ".")
print()
print("Server CPU per request: utime + stime of the server (all members in the cluster rows) over the "
      "benchmark, divided by the requests answered (events delivered for watch), in µs.")
print()
print("| test | etcd | keel | keel/etcd | CPU/request etcd (µs ↓) | keel | keel/etcd |")
print("|---|---:|---:|---:|---:|---:|---:|")

def ratio(e, k):
    if isinstance(e, float) and isinstance(k, float) and e > 0:
        return f"{k / e:.2f}×"
    return "n/a"

for test, metric, label, digits in rows:
    e, k = median(test, "etcd", metric), median(test, "keel", metric)
    if e is None and k is None:
        continue
    ce, ck_ = median(test, "etcd", "cpu_us"), median(test, "keel", "cpu_us")
    cpu_cells = "n/a | n/a | n/a"
    if ce is not None or ck_ is not None:
        cpu_cells = f"{show(ce, 1, test, None)} | {show(ck_, 1, test, None)} | {ratio(ce, ck_)}"
    print(f"| {label} | {show(e, digits, test, 'etcd')} | {show(k, digits, test, 'keel')} | "
          f"{ratio(e, k)} | {cpu_cells} |")

# The memory target: keel's VmRSS with 1M keys of 256 B at most 0.5x etcd's, on loads that
# both succeeded in full (every run: no failed or erroring load, exactly the loaded keys held).
TARGET = 0.5
if "memory" in only:
    label = "Target (VmRSS with 1M keys × 256 B at most 0.5× etcd's)"
    print()
    if skip_keel:
        print(f"{label}: not judged (--skip-keel)")
        sys.exit(0)
    if int(load) != 1_000_000:
        print(f"{label}: not judged (this run loaded {human(load)} keys; --quick is a smoke run)")
        sys.exit(0)
    problems = []
    for server in ("etcd", "keel"):
        if "fail" in cells.get(("load", server, "throughput"), ["fail"]):
            problems.append(f"the {server} load failed")
        if errors[("load", server)]:
            problems.append(f"the {server} load had {errors[('load', server)]} errors")
        counts = cells.get(("load", server, "keys"), [])
        if not counts or any(c != load for c in counts):
            problems.append(f"{server} held {', '.join(counts) or 'no counted'} keys, not {load}")
    e, k = median("rss-loaded", "etcd", "value"), median("rss-loaded", "keel", "value")
    if not isinstance(e, float) or not isinstance(k, float) or e <= 0:
        problems.append("no VmRSS measured")
    if problems:
        print(f"{label}: NOT met (not measured: {'; '.join(problems)})")
        sys.exit(1)
    ratio_ = k / e
    per_run = [float(kv) / float(ev) for ev, kv in
               zip(cells[("rss-loaded", "etcd", "value")], cells[("rss-loaded", "keel", "value")])]
    detail = (f"keel {k:,.0f} MiB / etcd {e:,.0f} MiB = {ratio_:.2f}×"
              + (f", medians of {runs} runs; per run {', '.join(f'{r:.2f}×' for r in per_run)}"
                 if int(runs) > 1 else ""))
    met = ratio_ <= TARGET
    print(f"{label}: {'met' if met else 'NOT met'} ({detail})")
    sys.exit(0 if met else 1)
PY
