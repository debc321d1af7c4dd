#!/usr/bin/env bash
# "Exclusive locks lose nothing" (issue 23): the exclusive scenarios of every
# backend on lockd as it was before the work (--base, default 2e0c1a9^, the
# commit before issue 23's groundwork) and on the current tree, in one run,
# and the ratio current/before of each figure (target: at least 0.95).
#
# Builds (Release, -j2, lockd only for the base): the base commit is
# exported with `git archive` into $BEFORE_DIR/src (no git worktree is
# registered; .source-commit names the commit) and built in
# $BEFORE_DIR/build; the current tree is built in $BUILD_DIR. Both lockd
# binaries are driven by the current tree's lockbench: its exclusive
# requests are the bytes they were before, so only lockd differs.
#
# Per backend the servers are started once (as bench/run.sh does); then each
# repetition runs both lockd binaries, alternating which goes first (before,
# after, after, before, ...), each a fresh process (own mysql.table_prefix,
# zookeeper.root and redis.key_prefix, so neither meets the other's schema or
# data), warmed up for 1 s, then `contended` (one lock, the counter in Redis,
# as run.sh) and `uncontended` at --clients clients.
#
# Usage: bench/before_after.sh [flags]
#   --base REV        the commit to compare with (2e0c1a9^)
#   --backends "memory redis mysql zookeeper"   (default: all four)
#   --clients 16      clients of every run
#   --reps 3          repetitions of each point per binary (median reported)
#   --duration 5s     length of each run
#   --build-only      build both, run nothing
#   --no-build        use the binaries as they are
# Environment: BUILD_DIR (default build-bench), BEFORE_DIR (default
# build/before-<short sha of --base>), OUT (default bench/results): writes
# $OUT/before_after.jsonl (every run's JSON, label "before" or "after") and
# appends to $OUT/commands.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
BASE=2e0c1a9^
BACKENDS="memory redis mysql zookeeper"
CLIENTS=16
REPS=3
DURATION=5s
BUILD=1
RUN=1
ARGS_USED="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --build-only) RUN=0; shift ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "before_after.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-before-after
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

BASE_SHA=$(git -C "$ROOT" rev-parse --verify "$BASE^{commit}") || die "--base $BASE: no such commit"
BEFORE_DIR=${BEFORE_DIR:-$ROOT/build/before-${BASE_SHA:0:7}}

if [[ $BUILD == 1 ]]; then
  export_commit "$BASE_SHA" "$BEFORE_DIR"
  build_release "$BEFORE_DIR/build" "$BEFORE_DIR/src" 2 lockd
  build_release "$BUILD_DIR" "$ROOT" 2 lockd lockbench
fi
[[ $RUN == 1 ]] || exit 0
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
declare -A BINARY=([before]=$BEFORE_DIR/build/service/lockd [after]=$BUILD_DIR/service/lockd)
for b in before after; do [[ -x ${BINARY[$b]} ]] || die "${BINARY[$b]} is not built"; done
[[ -x $LOCKBENCH ]] || die "$LOCKBENCH is not built"

mkdir -p "$OUT"
RESULTS=$OUT/before_after.jsonl
: >"$RESULTS"
touch "$OUT/commands.txt" "$OUT/lockbench.stderr"
CURRENT=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- service backends protos tools/lockbench || echo "+uncommitted-changes")
echo "# bench/before_after.sh $ARGS_USED ($(date -u +%Y-%m-%dT%H:%M:%SZ); before ${BASE_SHA:0:7}, after $CURRENT)" >>"$OUT/commands.txt"

# measure LABEL BACKEND REP: a fresh lockd of that build, warmed up, then
# the two exclusive scenarios.
measure() {
  local label=$1 backend=$2 rep=$3
  LOCKD=${BINARY[$label]}
  case $backend in
    memory) LOCKD_EXTRA_FLAGS="" ;;
    redis) LOCKD_EXTRA_FLAGS="--redis.key_prefix=lockd-$label" ;;
    mysql) LOCKD_EXTRA_FLAGS="--mysql.table_prefix=${label}_" ;;
    zookeeper) LOCKD_EXTRA_FLAGS="--zookeeper.root=/lockd-$label" ;;
  esac
  start_lockd "$backend"
  "$LOCKBENCH" uncontended --target="127.0.0.1:$LOCKD_PORT" --clients=4 --duration=1s >/dev/null 2>&1 || true
  bench_json "$RESULTS" "$label" "$rep" contended --target="127.0.0.1:$LOCKD_PORT" \
    --clients="$CLIENTS" --budget=10000000 --duration="$DURATION" --counter-redis="127.0.0.1:$REDIS_PORT"
  bench_json "$RESULTS" "$label" "$rep" uncontended --target="127.0.0.1:$LOCKD_PORT" \
    --clients="$CLIENTS" --duration="$DURATION"
  stop_lockd
}

start_redis
for backend in $BACKENDS; do
  start_servers "$backend"
  log "backend $backend (load $(cut -d' ' -f1-3 /proc/loadavg))"
  for rep in $(seq 1 "$REPS"); do
    if (( rep % 2 == 1 )); then order="before after"; else order="after before"; fi
    for label in $order; do measure "$label" "$backend" "$rep"; done
  done
  stop_servers "$backend"
done

python3 "$ROOT/bench/ratios.py" before-after "$RESULTS"
