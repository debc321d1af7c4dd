#!/usr/bin/env bash
# `lockctl verify` on each backend (issue 24's figures): starts the backend's
# servers as bench/run.sh does and lockd against them, runs one verify of
# DURATION with its defaults (16 workers, every workload, api both, ttl 10s)
# per deployment, and keeps each report:
#   memory          one lockd, memory backend
#   redis-3         three lockd replicas on one Redis (--server a,b,c)
#   mysql           one lockd on MariaDB
#   zookeeper       one lockd on ZooKeeper
#   redis-3-kill    redis-3 with --nemesis kill-holders
# The figures are summarised in bench/verify-RESULTS.md.
#
# Usage: bench/verify.sh [--duration 60s] [--runs "memory redis-3 ..."] [--no-build]
# Environment: BUILD_DIR (default build/rel, a Release build of lockd and
# lockctl), OUT (default bench/results): writes $OUT/verify-<run>.txt (the
# text report) and .json, and appends the commands to $OUT/commands.txt.
# Exit: 1 when a run's verify did not pass.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/rel}
OUT=${OUT:-$ROOT/bench/results}
DURATION=60s
RUNS="memory redis-3 mysql zookeeper redis-3-kill"
BUILD=1
ARGS_USED="$*"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "verify.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-verify
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

if [[ $BUILD == 1 ]]; then
  build_release "$BUILD_DIR" "$ROOT" 2 lockd lockctl
fi
LOCKD=$BUILD_DIR/service/lockd
LOCKCTL=$BUILD_DIR/tools/lockctl/lockctl
[[ -x $LOCKD && -x $LOCKCTL ]] || die "lockd/lockctl not built in $BUILD_DIR"

mkdir -p "$OUT"
touch "$OUT/commands.txt"
echo "# bench/verify.sh $ARGS_USED ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(git -C "$ROOT" rev-parse --short HEAD))" >>"$OUT/commands.txt"

# verify_run NAME SERVER FLAGS...: one verify, its text and JSON reports
# (the JSON one re-checked from the saved history, so both describe one run).
failed=0
verify_run() {
  local name=$1 server=$2; shift 2
  local history=$WORK/$name.jsonl
  local cmd=("$LOCKCTL" verify --server "$server" --duration "$DURATION" --history "$history" "$@")
  echo "lockctl verify --server $server --duration $DURATION $*" >>"$OUT/commands.txt"
  log "$name: lockctl verify for $DURATION (load $(cut -d' ' -f1-3 /proc/loadavg))"
  local code=0
  "${cmd[@]}" >"$OUT/verify-$name.txt" 2>&1 || code=$?
  "$LOCKCTL" verify --check "$history" --output json >"$OUT/verify-$name.json" 2>&1 || true
  log "$name: exit $code: $(tail -1 "$OUT/verify-$name.txt")"
  [[ $code == 0 ]] || failed=1
}

# lockd_replicas BACKEND N: N lockds on the backend; sets SERVERS (a,b,c)
# and REPLICA_PIDS.
lockd_replicas() {
  local backend=$1 n=$2 list=()
  REPLICA_PIDS=()
  for _ in $(seq 1 "$n"); do
    start_lockd "$backend"
    list+=("127.0.0.1:$LOCKD_PORT")
    REPLICA_PIDS+=("$LOCKD_PID")
  done
  SERVERS=$(IFS=,; echo "${list[*]}")
}
stop_replicas() {
  local pid
  for pid in "${REPLICA_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${REPLICA_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}

for run in $RUNS; do
  case $run in
    memory) lockd_replicas memory 1; verify_run "$run" "$SERVERS" ;;
    redis-3|redis-3-kill)
      [[ -n ${REDIS_PORT:-} ]] || start_redis
      lockd_replicas redis 3
      if [[ $run == redis-3 ]]; then
        verify_run "$run" "$SERVERS"
      else
        verify_run "$run" "$SERVERS" --nemesis kill-holders
      fi ;;
    mysql|zookeeper)
      start_servers "$run"
      lockd_replicas "$run" 1
      verify_run "$run" "$SERVERS"
      stop_replicas
      stop_servers "$run"
      continue ;;
    *) die "unknown run $run" ;;
  esac
  stop_replicas
done
exit $failed
