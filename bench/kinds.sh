#!/usr/bin/env bash
# The other kinds against their baselines, in one run (issue 23): starts the
# backend's servers as bench/run.sh does and one lockd per backend, then, for
# each repetition, runs back to back
#   rw-shared      lockbench rw, 90% reads taken SHARED (--readers)
#   rw-exclusive   the same, every read taken EXCLUSIVE (--read-mode=exclusive)
#   semaphore-4    lockbench semaphore --limit=4 (--limit)
#   semaphore-1    the same with --limit=1
#   acquire-all    lockbench acquire-all: pairs of 8 names in random orders
# and prints, per backend, the medians and the ratios the issue asks for:
# rw-shared / rw-exclusive CS/s (target >= 3 on memory and redis) and
# semaphore-4 / semaphore-1 CS/s (target >= 2.5), with p99, fairness, the
# most readers seen holding together and acquire-all's figures.
#
# Usage: bench/kinds.sh [flags]
#   --backends "memory redis mysql zookeeper"   (default: memory redis)
#   --clients 16      clients of every run
#   --reps 3          repetitions (median reported)
#   --duration 5s     length of each run
#   --hold 1ms        how long each grant is held (lockbench --hold)
#   --readers 0.9     share of reads in rw
#   --limit 4         the semaphore's limit (the baseline is always 1)
#   --no-build        use the binaries in $BUILD_DIR as they are
# Environment: BUILD_DIR (default build-bench, a Release build, as run.sh),
# OUT (default bench/results): writes $OUT/kinds.jsonl (every run's JSON
# with its label and repetition) and appends to $OUT/commands.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
BACKENDS="memory redis"
CLIENTS=16
REPS=3
DURATION=5s
HOLD=1ms
READERS=0.9
LIMIT=4
BUILD=1
ARGS_USED="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backends) BACKENDS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --hold) HOLD=$2; shift 2 ;;
    --readers) READERS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "kinds.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-kinds
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

if [[ $BUILD == 1 ]]; then
  build_release "$BUILD_DIR" "$ROOT" 2 lockd lockbench
fi
LOCKD=$BUILD_DIR/service/lockd
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
[[ -x $LOCKD && -x $LOCKBENCH ]] || die "lockd/lockbench not built in $BUILD_DIR"

mkdir -p "$OUT"
RESULTS=$OUT/kinds.jsonl
: >"$RESULTS"
touch "$OUT/commands.txt" "$OUT/lockbench.stderr"
echo "# bench/kinds.sh $ARGS_USED ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$ROOT" rev-parse --short HEAD))" >>"$OUT/commands.txt"

start_redis
for backend in $BACKENDS; do
  start_servers "$backend"
  start_lockd "$backend"
  "$LOCKBENCH" uncontended --target="127.0.0.1:$LOCKD_PORT" --clients=4 --duration=1s >/dev/null 2>&1 || true
  log "backend $backend (load $(cut -d' ' -f1-3 /proc/loadavg))"
  common=(--target="127.0.0.1:$LOCKD_PORT" --clients="$CLIENTS" --duration="$DURATION" --hold="$HOLD")
  for rep in $(seq 1 "$REPS"); do
    bench_json "$RESULTS" rw-shared "$rep" rw "${common[@]}" --readers="$READERS"
    bench_json "$RESULTS" rw-exclusive "$rep" rw "${common[@]}" --readers="$READERS" --read-mode=exclusive
    bench_json "$RESULTS" "semaphore-$LIMIT" "$rep" semaphore "${common[@]}" --limit="$LIMIT"
    bench_json "$RESULTS" semaphore-1 "$rep" semaphore "${common[@]}" --limit=1
    bench_json "$RESULTS" acquire-all "$rep" acquire-all "${common[@]}" --names=8
  done
  stop_lockd
  stop_servers "$backend"
done

python3 "$ROOT/bench/ratios.py" kinds "$RESULTS" --limit "$LIMIT"
