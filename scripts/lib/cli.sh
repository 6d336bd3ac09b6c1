# Shared by the benchmark scripts' command lines, sourced before anything else: `usage` (the
# script's header comment, from its second line to `set -euo pipefail`), `die` and `say` (messages
# on stderr after the script's name), and `parse_flags`. The sourcing script sets SCRIPT (its name
# for messages), BUILD and KEEP (their defaults), and FLAGS, an associative array from each of its
# own value flags to the variable it sets (e.g. `declare -A FLAGS=([--nodes]=NODES)`).
# shellcheck shell=bash

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "$SCRIPT: $*" >&2; exit 1; }
say() { echo "$SCRIPT: $*" >&2; }

# parse_flags ARGS... : `--flag VALUE` for each flag FLAGS names sets its variable; `--no-build`
# sets BUILD=0 and `--keep` KEEP=1; `-h`/`--help` prints the usage and exits; anything else is an
# error, after the usage.
parse_flags() {
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --no-build) BUILD=0 ;;
            --keep) KEEP=1 ;;
            -h|--help) usage; exit 0 ;;
            *)
                [[ -n "${FLAGS[$1]:-}" ]] || { usage >&2; die "unknown argument: $1"; }
                [[ $# -ge 2 ]] || die "$1 needs a value"
                printf -v "${FLAGS[$1]}" '%s' "$2"
                shift
                ;;
        esac
        shift
    done
}
