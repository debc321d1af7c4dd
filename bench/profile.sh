#!/usr/bin/env bash
# Shows where lockd's CPU goes under the uncontended benchmark load: lockd
# (memory or redis backend) and, for comparison, lockbench_null_server (a
# LockService doing no lock work, served the same way) each get 16 lockbench
# clients for a few seconds while `perf record` samples the server and
# `perf stat` counts its context switches. Prints, per server: pairs/s, CPU
# microseconds and context switches per acquire+release pair, and the share
# of the server's CPU samples by shared object (kernel, gRPC, protobuf, libc,
# lockd's own binary, hiredis).
#
# Usage: bench/profile.sh [--clients 16] [--duration 5] [--backends "memory redis"]
#                         [--api unary|session]   (lockbench's --api; unary)
# Needs: perf (Debian linux-perf), redis-server for the redis backend, a
# Release build in $BUILD_DIR (default build-bench; bench/run.sh makes it).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
CLIENTS=16
DURATION=5
BACKENDS="memory redis"
API=unary
while [[ $# -gt 0 ]]; do
  case "$1" in
    --clients) CLIENTS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --api) API=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "profile.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "profile.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
LOCKD=$BUILD_DIR/service/lockd
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
NULL_SERVER=$BUILD_DIR/tools/lockbench/lockbench_null_server
[[ -x $LOCKD && -x $LOCKBENCH && -x $NULL_SERVER ]] || {
  echo "profile.sh: build first: cmake --build $BUILD_DIR --target lockd lockbench lockbench_null_server" >&2
  exit 1
}

WORK_NAME=lockd-profile
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
wait_port() {
  local i
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# profile NAME PID PORT: loads the server at PORT and reports on PID.
profile() {
  local name=$1 pid=$2 port=$3 hz t0 t1 pairs rate cs
  hz=$(getconf CLK_TCK)
  t0=$(ticks "$pid")
  perf record -q -F 999 -g -p "$pid" -o "$WORK/$name.data" -- sleep "$((DURATION - 1))" \
    >/dev/null 2>&1 &
  local rec=$!
  perf stat -x, -e context-switches -p "$pid" -o "$WORK/$name.stat" -- sleep "$DURATION" \
    >/dev/null 2>&1 &
  local st=$!
  "$LOCKBENCH" uncontended --target="127.0.0.1:$port" --clients="$CLIENTS" \
    --duration="${DURATION}s" --api="$API" --json >"$WORK/$name.json"
  t1=$(ticks "$pid")
  wait "$rec" "$st" || true
  pairs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pairs"])' "$WORK/$name.json")
  rate=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["pairs_per_s"]))' "$WORK/$name.json")
  cs=$(awk -F, '/context-switches/ {print $1}' "$WORK/$name.stat")
  echo "== $name ($API): $rate pairs/s; per pair: $(( (t1 - t0) * 1000000 / hz / pairs )) us of server CPU," \
    "$(python3 -c "print(round($cs / $pairs, 2))") context switches (perf stat, whole run)"
  echo "   share of the server's CPU samples by shared object:"
  perf report -i "$WORK/$name.data" --no-children --sort dso -g none --percent-limit 1 2>/dev/null \
    | grep -v '^#' | grep -v '^$' | sed 's/^/   /'
}

port=$(free_port)
"$NULL_SERVER" "127.0.0.1:$port" 2>"$WORK/null.log" &
PIDS+=($!)
wait_port "$port"
profile grpc-floor "${PIDS[-1]}" "$port"

for backend in $BACKENDS; do
  args=(--backend="$backend")
  if [[ $backend == redis ]]; then
    rport=$(free_port)
    redis-server --port "$rport" --bind 127.0.0.1 --dir "$WORK" --save "" --appendonly no \
      >"$WORK/redis.log" 2>&1 &
    PIDS+=($!)
    wait_port "$rport"
    args+=(--redis.addresses="127.0.0.1:$rport")
  fi
  port=$(free_port)
  "$LOCKD" --listen="127.0.0.1:$port" "${args[@]}" 2>"$WORK/lockd-$backend.log" &
  PIDS+=($!)
  wait_port "$port"
  profile "lockd-$backend" "${PIDS[-1]}" "$port"
done
