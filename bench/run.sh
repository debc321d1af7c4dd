#!/usr/bin/env bash
# Runs the lockd benchmark: starts real Redis, MariaDB and ZooKeeper servers
# (plain processes on free loopback ports in temporary directories, as the
# tests do), starts lockd on each backend, runs every lockbench scenario at
# each client count and API (unary calls and the Session stream; repeated,
# the report takes the median), runs the
# direct-Redis baseline (hiredis + the redis backend's Lua scripts, no lockd),
# then writes the generated part of bench/RESULTS.md and the PNG charts in
# bench/charts/.
#
# Usage: bench/run.sh [flags]
#   --backends "memory redis mysql zookeeper"   backends to run (default: all built)
#   --clients "1 4 16 64"    client counts
#   --reps 3                 repetitions of each point (median reported)
#   --duration 5s            length of each contended/uncontended run
#   --waiters 10000          parked Acquires in the waiters scenario
#   --sessions 10000         Session streams in the holders scenario (each
#                            holds one lock for 10s, lease 2s; run
#                            once per backend and repetition, over Session
#                            streams whatever --apis and --clients say)
#   --scenarios "contended uncontended waiters holders expiry"
#   --apis "unary session"   how lockbench calls lockd (lockbench --api): each
#                            scenario runs once per API (expiry: unary only,
#                            a session renews its holds); the direct-Redis
#                            baseline has no API and runs once
#   --quick                  1 repetition, 2 s runs, 2000 waiters, 2000
#                            sessions (a smoke run)
#   --append                 add to the results in $OUT instead of starting
#                            afresh; the report keeps, for each point, the
#                            latest run (to re-measure some backends when
#                            the machine is quieter)
#   --no-direct              skip the direct-Redis baseline
#   --no-floor               skip the gRPC floor (uncontended against
#                            lockbench_null_server, a LockService doing no work)
#   --no-build               use the binaries in $BUILD_DIR as they are
#   --no-report              only collect results (bench/results/raw.jsonl)
# Environment: BUILD_DIR (default build-bench, a Release build), OUT (default
# bench/results), LOCKD_EXTRA_FLAGS (more lockd flags, split on spaces, e.g.
# "--metrics.listen=127.0.0.1:0 --auth.rules=..." to measure metrics and
# authorization), HOLDERS_LEASE and HOLDERS_HOLD (the holders scenario's
# lease and hold, default 2s and 10s; the hold must be at least 3 leases). To measure exactly a commit while the tree has other work in
# progress: git archive HEAD | tar -x -C /tmp/src && git rev-parse --short HEAD
# > /tmp/src/.source-commit, then BUILD_DIR=/tmp/src/build-bench bench/run.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
BACKENDS=""
CLIENTS="1 4 16 64"
REPS=3
DURATION=5s
WAITERS=10000
SESSIONS=10000
HOLD=${HOLDERS_HOLD:-10s}
HOLD_LEASE=${HOLDERS_LEASE:-2s}
SCENARIOS="contended uncontended waiters holders expiry"
APIS="unary session"
BUILD=1
REPORT=1
FLOOR=1
DIRECT=1
APPEND=0
ARGS_USED="$*"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)

while [[ $# -gt 0 ]]; do
  case "$1" in
    --backends) BACKENDS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --waiters) WAITERS=$2; shift 2 ;;
    --sessions) SESSIONS=$2; shift 2 ;;
    --scenarios) SCENARIOS=$2; shift 2 ;;
    --apis) APIS=$2; shift 2 ;;
    --quick) REPS=1; DURATION=2s; WAITERS=2000; SESSIONS=2000; shift ;;
    --no-build) BUILD=0; shift ;;
    --no-floor) FLOOR=0; shift ;;
    --no-direct) DIRECT=0; shift ;;
    --append) APPEND=1; shift ;;
    --no-report) REPORT=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

for api in $APIS; do
  [[ $api == unary || $api == session ]] || { echo "run.sh: --apis: unary and/or session, not $api" >&2; exit 2; }
done


# --- processes and cleanup ---------------------------------------------------
WORK_NAME=lockd-bench
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

# --- build -------------------------------------------------------------------
if [[ $BUILD == 1 ]]; then
  build_release "$BUILD_DIR" "$ROOT" "$(nproc)" lockd lockbench lockbench_null_server
fi
LOCKD=$BUILD_DIR/service/lockd
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
NULL_SERVER=$BUILD_DIR/tools/lockbench/lockbench_null_server
[[ -x $LOCKD && -x $LOCKBENCH ]] || die "lockd/lockbench not built in $BUILD_DIR"

if [[ -z $BACKENDS ]]; then
  BACKENDS="memory"
  for b in redis mysql zookeeper; do
    # Built into lockd when its CMake target exists in this build tree.
    if grep -q "lockd_${b}_backend" "$BUILD_DIR/build.ninja" 2>/dev/null; then BACKENDS="$BACKENDS $b"; fi
  done
fi

if [[ $REPORT == 1 ]] && ! command -v gnuplot >/dev/null; then
  log "installing gnuplot-nox for the charts"
  SUDO=""; [[ $(id -u) == 0 ]] || SUDO=sudo
  $SUDO apt-get install -y -q gnuplot-nox >&2 || log "gnuplot-nox could not be installed; no charts"
fi

# bench LABEL API REP ARGS...: one lockbench run (with --api=API unless API
# is "-", the direct baseline); its JSON line (plus the repetition, the
# 1-minute load average before it and the CPU seconds each process used
# during it) goes to raw.jsonl.
bench() {
  local label=$1 api=$2 rep=$3; shift 3
  local tag=$label
  [[ $api != - ]] && set -- "$@" --api="$api" && tag="$label $api"
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  echo "lockbench $*" >>"$OUT/commands.txt"
  local lockd_pid=$LOCKD_PID server_pid=""
  [[ $label == redis-direct ]] && lockd_pid=""
  case $label in mysql) server_pid=$MYSQL_PID ;; zookeeper) server_pid=$ZK_PID ;; esac
  local l0 r0 s0 l1 r1 s1
  l0=$(cpu_ticks "$lockd_pid"); r0=$(cpu_ticks "$REDIS_PID"); s0=$(cpu_ticks "$server_pid")
  local out rc=0
  out=$(/usr/bin/time -f "%U %S" -o "$WORK/time.txt" "$LOCKBENCH" "$@" --json \
    2>>"$OUT/lockbench.stderr") || rc=$?
  l1=$(cpu_ticks "$lockd_pid"); r1=$(cpu_ticks "$REDIS_PID"); s1=$(cpu_ticks "$server_pid")
  if [[ -z $out ]]; then
    log "  $tag $1 rep $rep FAILED (exit $rc): $(tail -1 "$OUT/lockbench.stderr")"
    echo "{\"run\": \"$RUN_ID\", \"label\": \"$label\", \"api\": \"$api\", \"rep\": $rep, \"failed\": true, \"exit\": $rc, \"args\": \"$*\"}" >>"$OUT/raw.jsonl"
    return 0
  fi
  local client_cpu; client_cpu=$(awk '{print $1+$2}' "$WORK/time.txt" 2>/dev/null || echo 0)
  local cpu; cpu=$(awk -v t="$TICK" -v l=$((l1 - l0)) -v r=$((r1 - r0)) -v s=$((s1 - s0)) -v c="$client_cpu" \
    'BEGIN {printf "\"cpu_lockd_s\": %.2f, \"cpu_redis_s\": %.2f, \"cpu_db_s\": %.2f, \"cpu_client_s\": %.2f, ", l/t, r/t, s/t, c}')
  echo "$out" | sed "s/^{/{\"run\": \"$RUN_ID\", \"label\": \"$label\", \"rep\": $rep, \"load1_before\": $load, \"exit\": $rc, $cpu/" >>"$OUT/raw.jsonl"
  log "  $tag $1 rep $rep: $(echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
keys = ["clients", "cs_per_s", "pairs_per_s", "acquire_p99_ms", "handoff_p50_ms", "fairness", "lost_updates",
        "rss_parked_kb", "threads_parked", "drain_s", "delay_p50_ms", "sessions", "setup_s", "lost",
        "rss_full_mb", "threads_full", "ok"]
print(" ".join("%s=%s" % (k, round(r[k], 3) if isinstance(r[k], float) else r[k]) for k in keys if k in r))')"
}

# run_scenarios LABEL: every scenario at every client count, for each API,
# against the running lockd (LOCKD_PORT) or, for redis-direct, straight
# against Redis (no API).
run_scenarios() {
  local label=$1
  local c rep api apis=$APIS
  [[ $label == redis-direct ]] && apis="-"
  for scenario in $SCENARIOS; do
    if [[ $scenario == holders ]]; then
      [[ $label == redis-direct || $label == grpc-floor ]] && continue
      for rep in $(seq 1 "$REPS"); do
        # A fresh lockd, as for waiters: its idle RSS is the baseline.
        stop_lockd; start_lockd "$label"
        bench "$label" session "$rep" holders --target="127.0.0.1:$LOCKD_PORT" \
          --sessions="$SESSIONS" --channels=100 --lease="$HOLD_LEASE" --hold="$HOLD" \
          --lockd-pid="$LOCKD_PID"
      done
      continue
    fi
    for c in $CLIENTS; do
      for api in $apis; do
        # A session renews its holds: no lease ends by itself.
        [[ $scenario == expiry && $api == session ]] && continue
        for rep in $(seq 1 "$REPS"); do
          local target=(--target="127.0.0.1:${LOCKD_PORT:-0}")
          [[ $label == redis-direct ]] && target=(--direct-redis="127.0.0.1:$REDIS_PORT")
          set -- "${target[@]}"
          case $scenario in
            contended)
              bench "$label" "$api" "$rep" contended "$@" --clients="$c" --budget=10000000 \
                --duration="$DURATION" --counter-redis="127.0.0.1:$REDIS_PORT" ;;
            uncontended)
              bench "$label" "$api" "$rep" uncontended "$@" --clients="$c" --duration="$DURATION" ;;
            waiters)
              [[ $label == redis-direct ]] && continue
              # A fresh lockd for each: memory freed by earlier runs stays in
              # the process (malloc keeps it) and would be counted as the
              # waiters' cost. --target changes with the new port.
              stop_lockd; start_lockd "$label"
              bench "$label" "$api" "$rep" waiters --target="127.0.0.1:$LOCKD_PORT" --clients="$c" \
                --waiters="$WAITERS" --lockd-pid="$LOCKD_PID" ;;
            expiry)
              [[ $label == redis-direct ]] && continue
              bench "$label" "$api" "$rep" expiry --target="127.0.0.1:$LOCKD_PORT" --clients="$c" \
                --lease=1s --chain=3 ;;
          esac
        done
      done
    done
  done
}

# --- run ---------------------------------------------------------------------
mkdir -p "$OUT"
if [[ $APPEND == 0 ]]; then
  : >"$OUT/raw.jsonl"; : >"$OUT/commands.txt"; : >"$OUT/lockbench.stderr"; : >"$OUT/env.txt"
fi
echo "# run $RUN_ID: bench/run.sh $ARGS_USED" >>"$OUT/commands.txt"
{
  echo "run=$RUN_ID"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "args=$ARGS_USED"
  echo "cpus=$(nproc)"
  echo "cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
  echo "memory=$(grep MemTotal /proc/meminfo | awk '{printf "%.1f GiB", $2/1048576}')"
  echo "kernel=$(uname -sr)"
  echo "os=$(. /etc/os-release && echo "$PRETTY_NAME")"
  # The source the binaries were built from: a git tree, or an export of one
  # (`git archive` with the commit in .source-commit).
  SRC=$(grep -m1 '^CMAKE_HOME_DIRECTORY:' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2)
  if [[ -f $SRC/.source-commit ]]; then
    echo "lockd_commit=$(cat "$SRC/.source-commit") (clean export in $SRC)"
  else
    echo "lockd_commit=$(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD -- service backends protos tools/lockbench || echo "+uncommitted-changes")"
  fi
  echo "build=$(grep -m1 CMAKE_BUILD_TYPE: "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2), $(c++ --version | head -1)"
  for p in libgrpc++1.51 libprotobuf32 libhiredis0.14 redis-server mariadb-server zookeeper default-jre-headless; do
    echo "pkg_$p=$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || echo "not installed")"
  done
  echo "redis_server=$(redis-server --version | head -1)"
  echo "mariadbd=$(mariadbd --version 2>/dev/null | head -1)"
  echo "java=$(java -version 2>&1 | head -1)"
  echo "backends=$BACKENDS"
  echo "clients=$CLIENTS"
  echo "reps=$REPS"
  echo "duration=$DURATION"
  echo "waiters=$WAITERS"
  echo "sessions=$SESSIONS"
  echo "apis=$APIS"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$OUT/env.txt"

start_redis
for backend in $BACKENDS; do
  start_servers "$backend"
  start_lockd "$backend"
  # Warm-up (connections, caches, JIT of ZooKeeper); not recorded.
  for api in $APIS; do
    "$LOCKBENCH" uncontended --target="127.0.0.1:$LOCKD_PORT" --clients=4 --duration=1s \
      --api="$api" >/dev/null 2>&1 || true
  done
  log "backend $backend (load $(cut -d' ' -f1-3 /proc/loadavg))"
  run_scenarios "$backend"
  echo "lockd_threads_$backend=$(grep Threads /proc/$LOCKD_PID/status | awk '{print $2}')" >>"$OUT/env.txt"
  stop_lockd
  stop_servers "$backend"
done

# The gRPC floor: the uncontended runs (each API: unary calls, and ops on a
# Session stream) against a LockService that does no lock work, served like
# lockd. lockd's uncontended figure over this one is the share of the cost
# that is lockd's own.
if [[ $FLOOR == 1 && -x $NULL_SERVER && " $SCENARIOS " == *" uncontended "* ]]; then
  LOCKD_PORT=$(free_port)
  "$NULL_SERVER" "127.0.0.1:$LOCKD_PORT" >"$WORK/null-server.log" 2>&1 &
  LOCKD_PID=$!; PIDS+=("$LOCKD_PID")
  wait_for 30 grep -q "serving on" "$WORK/null-server.log" || die "lockbench_null_server did not start"
  echo "lockbench_null_server 127.0.0.1:$LOCKD_PORT" >>"$OUT/commands.txt"
  log "gRPC floor (load $(cut -d' ' -f1-3 /proc/loadavg))"
  SCENARIOS_SAVED=$SCENARIOS
  SCENARIOS=uncontended
  run_scenarios grpc-floor
  SCENARIOS=$SCENARIOS_SAVED
  stop_lockd
fi

# The baseline: the same contended and uncontended runs, no lockd.
if [[ $DIRECT == 1 ]]; then
  SCENARIOS_SAVED=$SCENARIOS
  SCENARIOS=$(echo "$SCENARIOS" | tr ' ' '\n' | grep -E '^(contended|uncontended)$' | tr '\n' ' ' || true)
  log "direct-Redis baseline (load $(cut -d' ' -f1-3 /proc/loadavg))"
  run_scenarios redis-direct
  SCENARIOS=$SCENARIOS_SAVED
fi
echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"

if [[ $REPORT == 1 ]]; then
  python3 "$ROOT/bench/report.py" --out "$OUT" --results "$ROOT/bench/RESULTS.md" \
    --charts "$ROOT/bench/charts"
fi
log "done: $OUT/raw.jsonl"
