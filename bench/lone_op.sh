#!/usr/bin/env bash
# "A lone op pays no latency" (issue 25): one thread's acquire and release
# p50 through a Session (lockbench service --threads=1 --api=session, each
# acquire alone on the stream), with the client and lockd of --base (default
# 7955b1c, the last commit whose C++ client sent one message per op) and with
# the current tree's, in one run, alternating which goes first.
#
# Builds (Release, -j2) lockd and lockbench of the base into
# $BEFORE_DIR/build (exported with `git archive`, as bench/before_after.sh
# does) and of the current tree into $BUILD_DIR. Per backend the servers
# start once (bench/lib.sh); each repetition runs a fresh lockd of each
# build, warmed up for 1 s.
#
# Usage: bench/lone_op.sh [flags]
#   --base REV        the commit to compare with (7955b1c)
#   --backends "memory redis"
#   --reps 3          repetitions per build (median reported)
#   --duration 5s     length of each run
#   --no-build        use the binaries as they are
# Environment: BUILD_DIR (default build-bench), BEFORE_DIR (default
# build/before-<short sha of --base>), OUT (default bench/results): writes
# $OUT/lone_op.jsonl and appends to $OUT/commands.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
BASE=7955b1c
BACKENDS="memory redis"
REPS=3
DURATION=5s
BUILD=1
ARGS_USED="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "lone_op.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-lone-op
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

BASE_SHA=$(git -C "$ROOT" rev-parse --verify "$BASE^{commit}") || die "--base $BASE: no such commit"
BEFORE_DIR=${BEFORE_DIR:-$ROOT/build/before-${BASE_SHA:0:7}}
if [[ $BUILD == 1 ]]; then
  export_commit "$BASE_SHA" "$BEFORE_DIR"
  build_release "$BEFORE_DIR/build" "$BEFORE_DIR/src" 2 lockd lockbench
  build_release "$BUILD_DIR" "$ROOT" 2 lockd lockbench
fi
declare -A BINARY=([before]=$BEFORE_DIR/build/service/lockd [after]=$BUILD_DIR/service/lockd)
declare -A BENCH=([before]=$BEFORE_DIR/build/tools/lockbench/lockbench
                  [after]=$BUILD_DIR/tools/lockbench/lockbench)
for b in before after; do
  [[ -x ${BINARY[$b]} && -x ${BENCH[$b]} ]] || die "the $b build lacks lockd or lockbench"
done

mkdir -p "$OUT"
RESULTS=$OUT/lone_op.jsonl
: >"$RESULTS"
touch "$OUT/commands.txt" "$OUT/lockbench.stderr"
echo "# bench/lone_op.sh $ARGS_USED ($(date -u +%Y-%m-%dT%H:%M:%SZ); before ${BASE_SHA:0:7}, after $(git -C "$ROOT" rev-parse --short HEAD))" >>"$OUT/commands.txt"

start_redis
for backend in $BACKENDS; do
  start_servers "$backend"
  for rep in $(seq 1 "$REPS"); do
    if (( rep % 2 == 1 )); then order="before after"; else order="after before"; fi
    for label in $order; do
      LOCKD=${BINARY[$label]} LOCKBENCH=${BENCH[$label]}
      case $backend in
        redis) LOCKD_EXTRA_FLAGS="--redis.key_prefix=lone-$label" ;;
        mysql) LOCKD_EXTRA_FLAGS="--mysql.table_prefix=lone_${label}_" ;;
        zookeeper) LOCKD_EXTRA_FLAGS="--zookeeper.root=/lone-$label" ;;
        *) LOCKD_EXTRA_FLAGS="" ;;
      esac
      start_lockd "$backend"
      "$LOCKBENCH" service --target="127.0.0.1:$LOCKD_PORT" --threads=1 --api=session \
        --duration=1s >/dev/null 2>&1 || true
      bench_json "$RESULTS" "$label" "$rep" service --target="127.0.0.1:$LOCKD_PORT" \
        --threads=1 --api=session --duration="$DURATION"
      stop_lockd
    done
  done
  stop_servers "$backend"
done

python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print('| backend | figure | before | after | after / before |')
print('|---|---|---|---|---|')
for backend in sorted({r['backend'] for r in runs}):
    for field in ('acquire_p50_ms', 'release_p50_ms', 'pairs_per_s'):
        med = {}
        for label in ('before', 'after'):
            vals = [r[field] for r in runs if r['backend'] == backend and r['label'] == label and field in r]
            med[label] = statistics.median(vals) if vals else None
        if None in med.values():
            continue
        print('| %s | %s | %.3f | %.3f | %.2f |' % (backend, field, med['before'], med['after'],
                                                   med['after'] / med['before']))
EOF
