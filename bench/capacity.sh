#!/usr/bin/env bash
# The measurements behind docs/capacity.md: what one acquire+release pair
# costs each process (lockd, the backend's servers, the load generator), and
# how throughput moves with the number of lockd replicas, Redis primaries and
# ZooKeeper servers on this machine. Every setup runs lockbench's uncontended
# scenario (distinct locks, so nothing serializes on a lock) with --clients
# clients spread round-robin over the lockd replicas, once per API.
#
# Setups (--setups, default all):
#   redis-1p     one Redis primary (standalone) behind 1, 2 and 3 lockd replicas
#   redis-3p     a Redis Cluster of 3 primaries (no replicas) behind 1 and 3
#                replicas (lockd --redis.mode=cluster; skipped if refused)
#   zookeeper-1  one ZooKeeper server behind 1 replica
#   zookeeper-3  a 3-server ZooKeeper ensemble behind 1 replica
#   mysql        one MariaDB server behind 1 and 2 replicas
#
# Usage: bench/capacity.sh [--duration 5s] [--clients 16] [--apis "unary session"]
#                          [--setups "redis-1p redis-3p zookeeper-1 zookeeper-3 mysql"]
# Needs a Release build in $BUILD_DIR (default build-bench; bench/run.sh makes
# it). Writes $OUT/capacity.jsonl (default bench/results) and prints a table:
# pairs/s, and CPU microseconds per pair of all lockd replicas together, of
# all backend servers together, and of lockbench.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build-bench}
OUT=${OUT:-$ROOT/bench/results}
DURATION=5s
CLIENTS=16
APIS="unary session"
SETUPS="redis-1p redis-3p zookeeper-1 zookeeper-3 mysql"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --apis) APIS=$2; shift 2 ;;
    --setups) SETUPS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "capacity.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done

WORK_NAME=lockd-capacity
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

LOCKD=$BUILD_DIR/service/lockd
LOCKBENCH=$BUILD_DIR/tools/lockbench/lockbench
[[ -x $LOCKD && -x $LOCKBENCH ]] || die "build first: cmake --build $BUILD_DIR --target lockd lockbench"
mkdir -p "$OUT"
RESULTS=$OUT/capacity.jsonl
: >"$RESULTS"
RUN_ID=$(date -u +%Y%m%dT%H%M%SZ)

SERVER_PIDS=()  # the backend's servers of the current setup
LOCKD_PIDS=()   # the lockd replicas of the current setup
TARGETS=""      # their addresses, comma-separated

# serving_or_dead PID LOG: lockd PID said it serves, or exited.
serving_or_dead() { grep -q "lockd serving on" "$2" || ! kill -0 "$1" 2>/dev/null; }

# start_replicas N FLAGS...: N lockd replicas with the same backend flags.
start_replicas() {
  local n=$1 i port log; shift
  LOCKD_PIDS=(); TARGETS=""
  for i in $(seq 1 "$n"); do
    port=$(free_port); log=$WORK/lockd-$port.log
    "$LOCKD" "--listen=127.0.0.1:$port" "$@" >"$log" 2>&1 &
    LOCKD_PIDS+=("$!"); PIDS+=("$!")
    wait_for 60 serving_or_dead "$!" "$log"
    grep -q "lockd serving on" "$log" || { log "lockd did not start: $(tail -3 "$log")"; return 1; }
    TARGETS+="${TARGETS:+,}127.0.0.1:$port"
  done
}

stop_replicas() {
  local pid
  for pid in "${LOCKD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${LOCKD_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  LOCKD_PIDS=()
}

stop_servers() {
  local pid
  for pid in "${SERVER_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${SERVER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  SERVER_PIDS=()
}

sum_ticks() {
  local pid total=0
  for pid in "$@"; do total=$((total + $(cpu_ticks "$pid"))); done
  echo "$total"
}

# measure SETUP: the uncontended run against TARGETS for each API.
measure() {
  local setup=$1 api out l0 s0 l1 s1 client_cpu
  for api in $APIS; do
    "$LOCKBENCH" uncontended --target="$TARGETS" --clients=4 --duration=1s --api="$api" \
      >/dev/null 2>&1 || true  # warm-up
    l0=$(sum_ticks "${LOCKD_PIDS[@]}"); s0=$(sum_ticks "${SERVER_PIDS[@]}")
    out=$(/usr/bin/time -f "%U %S" -o "$WORK/time.txt" "$LOCKBENCH" uncontended \
      --target="$TARGETS" --clients="$CLIENTS" --duration="$DURATION" --api="$api" --json \
      2>>"$WORK/lockbench.stderr") || { log "  $setup $api FAILED: $(tail -1 "$WORK/lockbench.stderr")"; continue; }
    l1=$(sum_ticks "${LOCKD_PIDS[@]}"); s1=$(sum_ticks "${SERVER_PIDS[@]}")
    client_cpu=$(awk '{print $1+$2}' "$WORK/time.txt")
    echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
setup, api, replicas, servers, run, tick = sys.argv[1:7]
lockd_s, server_s, client_s = int(sys.argv[7]) / int(tick), int(sys.argv[8]) / int(tick), float(sys.argv[9])
pairs = r["pairs"] or 1
row = {"run": run, "setup": setup, "api": api, "replicas": int(replicas), "servers": int(servers),
       "clients": r["clients"], "pairs_per_s": r["pairs_per_s"], "acquire_p99_ms": r["acquire_p99_ms"],
       "cpu_lockd_s": lockd_s, "cpu_servers_s": server_s, "cpu_client_s": client_s,
       "lockd_us_per_pair": 1e6 * lockd_s / pairs, "servers_us_per_pair": 1e6 * server_s / pairs,
       "client_us_per_pair": 1e6 * client_s / pairs, "load1": float(open("/proc/loadavg").read().split()[0])}
print(json.dumps(row))' "$setup" "$api" "${#LOCKD_PIDS[@]}" "${#SERVER_PIDS[@]}" "$RUN_ID" "$TICK" \
      $((l1 - l0)) $((s1 - s0)) "$client_cpu" >>"$RESULTS"
    log "  $setup api=$api replicas=${#LOCKD_PIDS[@]}: $(tail -1 "$RESULTS" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("pairs/s=%.0f lockd=%.0fus servers=%.0fus client=%.0fus per pair" % (r["pairs_per_s"],
      r["lockd_us_per_pair"], r["servers_us_per_pair"], r["client_us_per_pair"]))')"
  done
}

# A free port for a cluster node: its bus port (port + 10000) must exist too.
free_cluster_port() {
  python3 -c '
import socket
while True:
    a, b = socket.socket(), socket.socket()
    a.bind(("127.0.0.1", 0)); port = a.getsockname()[1]
    try:
        if port + 10000 <= 65535:
            b.bind(("127.0.0.1", port + 10000)); print(port); break
    except OSError:
        pass
    finally:
        a.close(); b.close()'
}

# Redis Cluster of $1 primaries, no replicas; sets CLUSTER_SEEDS.
start_redis_cluster() {
  local n=$1 i port dir nodes=()
  for i in $(seq 1 "$n"); do
    port=$(free_cluster_port); dir=$WORK/cluster-$port; mkdir -p "$dir"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize no --save "" \
      --appendonly no --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 2000 >"$dir/redis.log" 2>&1 &
    SERVER_PIDS+=("$!"); PIDS+=("$!")
    wait_for 30 redis-cli -p "$port" ping || die "cluster node $port did not start"
    nodes+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/cluster-create.log" 2>&1 \
    || die "redis-cli --cluster create failed: $(tail -5 "$WORK/cluster-create.log")"
  for i in "${nodes[@]}"; do
    wait_for 30 sh -c "redis-cli -p ${i#*:} cluster info | grep -q cluster_state:ok" || die "cluster not ok"
  done
  CLUSTER_SEEDS=$(IFS=,; echo "${nodes[*]}")
  log "redis cluster of $n primaries: $CLUSTER_SEEDS"
}

# ZooKeeper: one server (n=1, standalone) or an ensemble of n; sets ZK_HOSTS.
start_zookeeper_servers() {
  local n=$1 i dir servers="" client_ports=() main=org.apache.zookeeper.server.ZooKeeperServerMain
  for i in $(seq 1 "$n"); do
    client_ports+=("$(free_port)")
    servers+="server.$i=127.0.0.1:$(free_port):$(free_port)"$'\n'
  done
  [[ $n -gt 1 ]] && main=org.apache.zookeeper.server.quorum.QuorumPeerMain
  for i in $(seq 1 "$n"); do
    dir=$WORK/zk-$i; mkdir -p "$dir/data"; echo "$i" >"$dir/data/myid"
    {
      echo "tickTime=100"; echo "initLimit=50"; echo "syncLimit=20"
      echo "dataDir=$dir/data"; echo "clientPort=${client_ports[$((i - 1))]}"
      echo "clientPortAddress=127.0.0.1"; echo "maxClientCnxns=0"
      echo "minSessionTimeout=200"; echo "maxSessionTimeout=60000"
      echo "admin.enableServer=false"; echo "4lw.commands.whitelist=*"; echo "forceSync=no"
      [[ $n -gt 1 ]] && printf '%s' "$servers"
    } >"$dir/zoo.cfg"
    zk_java "$main" "$dir/zoo.cfg" >"$dir/zookeeper.log" 2>&1 &
    SERVER_PIDS+=("$!"); PIDS+=("$!")
  done
  ZK_HOSTS=""
  for i in "${client_ports[@]}"; do
    wait_for 120 zk_ok "$i" || die "ZooKeeper on port $i did not serve"
    ZK_HOSTS+="${ZK_HOSTS:+,}127.0.0.1:$i"
  done
  log "zookeeper: $n server(s) at $ZK_HOSTS"
}

echo "# capacity run $RUN_ID: bench/capacity.sh --duration $DURATION --clients $CLIENTS --apis \"$APIS\" --setups \"$SETUPS\"" >&2
for setup in $SETUPS; do
  case $setup in
    redis-1p)
      start_redis; SERVER_PIDS=("$REDIS_PID")
      for n in 1 2 3; do
        start_replicas "$n" --backend=redis "--redis.addresses=127.0.0.1:$REDIS_PORT" && measure "$setup"
        stop_replicas
        redis-cli -p "$REDIS_PORT" flushall >/dev/null
      done
      stop_servers ;;
    redis-3p)
      start_redis_cluster 3
      for n in 1 3; do
        if start_replicas "$n" --backend=redis --redis.mode=cluster "--redis.addresses=$CLUSTER_SEEDS"; then
          measure "$setup"
        else
          log "  $setup skipped: lockd refused cluster mode"
        fi
        stop_replicas
      done
      stop_servers ;;
    zookeeper-1|zookeeper-3)
      start_zookeeper_servers "${setup#zookeeper-}"
      start_replicas 1 --backend=zookeeper "--zookeeper.hosts=$ZK_HOSTS" && measure "$setup"
      stop_replicas; stop_servers ;;
    mysql)
      start_mariadb; SERVER_PIDS=("$MYSQL_PID")
      for n in 1 2; do
        start_replicas "$n" --backend=mysql --mysql.host=127.0.0.1 "--mysql.port=$MYSQL_PORT" \
          --mysql.user=lockd "--mysql.password_file=$MYSQL_PASSWORD_FILE" --mysql.database=lockd \
          && measure "$setup"
        stop_replicas
      done
      stop_servers ;;
    *) die "unknown setup $setup (see --help)" ;;
  esac
done

python3 - "$RESULTS" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| setup | API | lockd replicas | servers | pairs/s | lockd µs/pair | servers µs/pair | lockbench µs/pair | p99 ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print("| %s | %s | %d | %d | %s | %.0f | %.0f | %.0f | %.2f |" % (
        r["setup"], r["api"], r["replicas"], r["servers"], format(round(r["pairs_per_s"]), ","),
        r["lockd_us_per_pair"], r["servers_us_per_pair"], r["client_us_per_pair"], r["acquire_p99_ms"]))
EOF
