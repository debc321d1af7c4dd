#!/usr/bin/env bash
# The `service` scenario against its floors and baseline, in one run (issue
# 25): ONE lockd::Client shared by --threads threads (lockbench service).
# Starts the backends' servers as bench/run.sh does and one lockd per
# backend, and, for each repetition, runs back to back
#   unary-uncontended     lockbench service --api=unary (each thread its own lock)
#   session-uncontended   the same with --api=session
#   unary-contended       --contended: the threads on --locks locks
#   session-contended     the same with --api=session
# then the floors and the baseline with the same thread count:
#   grpc-floor            service (uncontended, each API) against
#                         lockbench_null_server, a LockService doing no work
#   redis-direct          lockbench uncontended --direct-redis --clients=THREADS
#                         (hiredis and the redis backend's scripts, a thread
#                         and connections per client, no lockd)
# Each run also records the CPU seconds lockbench, lockd (or the null server)
# and the backend's server used. Prints the medians and the ratios issue 25
# names (bench/ratios.py service).
#
# Usage: bench/service.sh [flags]
#   --backends "memory redis mysql zookeeper"   (default: all four)
#   --threads 64      threads of the one Client (and direct-Redis clients)
#   --reps 3          repetitions (median reported)
#   --duration 5s     length of each run
#   --hold 0s         time in each critical section (lockbench --hold)
#   --locks 8         locks of the contended runs
#   --no-build        use the binaries in $BUILD_DIR as they are
# Environment: BUILD_DIR (default build-bench, a Release build, as run.sh),
# OUT (default bench/results): writes $OUT/service.jsonl (every run's JSON
# with its label, repetition and CPU) and appends to $OUT/commands.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
BACKENDS="memory redis mysql zookeeper"
THREADS=64
REPS=3
DURATION=5s
HOLD=0s
LOCKS=8
BUILD=1
ARGS_USED="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --backends) BACKENDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --hold) HOLD=$2; shift 2 ;;
    --locks) LOCKS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "service.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-service
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

if [[ $BUILD == 1 ]]; then
  build_release "$BUILD_DIR" "$ROOT" 2 lockd lockbench lockbench_null_server
fi
LOCKD=$BUILD_DIR/service/lockd
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
NULL_SERVER=$BUILD_DIR/tools/lockbench/lockbench_null_server
[[ -x $LOCKD && -x $LOCKBENCH && -x $NULL_SERVER ]] \
  || die "lockd/lockbench/lockbench_null_server not built in $BUILD_DIR"

mkdir -p "$OUT"
RESULTS=$OUT/service.jsonl
: >"$RESULTS"
touch "$OUT/commands.txt" "$OUT/lockbench.stderr"
echo "# bench/service.sh $ARGS_USED ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$ROOT" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg))" >>"$OUT/commands.txt"

service=(service --threads="$THREADS" --duration="$DURATION" --hold="$HOLD")
# service_runs REP KIND [FLAGS...]: the service run of each API against the
# server on LOCKD_PORT, labelled API-KIND.
service_runs() {
  local rep=$1 kind=$2 api; shift 2
  for api in unary session; do
    bench_json "$RESULTS" "$api-$kind" "$rep" "${service[@]}" --target="127.0.0.1:$LOCKD_PORT" \
      --api="$api" "$@"
  done
}
start_redis
for backend in $BACKENDS; do
  start_servers "$backend"
  start_lockd "$backend"
  CPU_PIDS="lockd=$LOCKD_PID redis=$REDIS_PID"
  case $backend in
    mysql) CPU_PIDS+=" db=$MYSQL_PID" ;;
    zookeeper) CPU_PIDS+=" db=$ZK_PID" ;;
  esac
  # Warm-up (connections, caches, ZooKeeper's JIT); not recorded.
  for api in unary session; do
    "$LOCKBENCH" "${service[@]}" --target="127.0.0.1:$LOCKD_PORT" --duration=1s --api="$api" \
      >/dev/null 2>&1 || true
  done
  log "backend $backend (load $(cut -d' ' -f1-3 /proc/loadavg))"
  for rep in $(seq 1 "$REPS"); do
    service_runs "$rep" uncontended
    service_runs "$rep" contended --contended --locks="$LOCKS"
  done
  stop_lockd
  stop_servers "$backend"
done

# The floors: the same uncontended runs against a LockService doing no work.
LOCKD_PORT=$(free_port)
"$NULL_SERVER" "127.0.0.1:$LOCKD_PORT" >"$WORK/null-server.log" 2>&1 &
LOCKD_PID=$!; PIDS+=("$LOCKD_PID")
wait_for 30 grep -q "serving on" "$WORK/null-server.log" || die "lockbench_null_server did not start"
echo "lockbench_null_server 127.0.0.1:$LOCKD_PORT" >>"$OUT/commands.txt"
CPU_PIDS="lockd=$LOCKD_PID"
log "gRPC floor (load $(cut -d' ' -f1-3 /proc/loadavg))"
for rep in $(seq 1 "$REPS"); do
  service_runs "$rep" uncontended
done
stop_lockd

# The baseline: as many direct Redis clients as threads.
CPU_PIDS="redis=$REDIS_PID"
log "direct-Redis baseline (load $(cut -d' ' -f1-3 /proc/loadavg))"
for rep in $(seq 1 "$REPS"); do
  bench_json "$RESULTS" direct "$rep" uncontended --direct-redis="127.0.0.1:$REDIS_PORT" \
    --clients="$THREADS" --duration="$DURATION"
done

python3 "$ROOT/bench/ratios.py" service "$RESULTS"
