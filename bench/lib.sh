# Shared by the scripts in bench/ (sourced, not run). Set WORK_NAME first:
# this makes $WORK, a temporary directory, and on exit kills every process
# whose pid is in PIDS and removes $WORK. Also: free_port, log/die, wait_for,
# start_redis, start_mariadb, zk_java/zk_ok/start_zookeeper (ZooKeeper
# servers), start_servers/stop_servers (a backend's own servers),
# start_lockd/stop_lockd (one lockd: set LOCKD and OUT first), build_release,
# export_commit (a commit's tree, for a build of it; needs ROOT) and cpu_ticks.

WORK=$(mktemp -d "${TMPDIR:-/tmp}/$WORK_NAME.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free TCP port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# wait_for SECONDS COMMAND...: polls COMMAND every 50 ms.
wait_for() {
  local limit=$1; shift
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [[ $SECONDS -lt $end ]] || return 1
    sleep 0.05
  done
}

# Redis, as tests/support/redis_server.cc starts it.
start_redis() {
  REDIS_DIR=$WORK/redis; mkdir -p "$REDIS_DIR"
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$REDIS_DIR" --daemonize no \
    --save "" --appendonly no --loglevel notice >"$REDIS_DIR/redis.log" 2>&1 &
  REDIS_PID=$!; PIDS+=("$REDIS_PID")
  wait_for 30 redis-cli -p "$REDIS_PORT" ping || die "redis-server did not start: $(cat "$REDIS_DIR/redis.log")"
  log "redis-server on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"
}

# MariaDB, as tests/support/mariadb_server.cc starts it (same InnoDB flags).
INNODB_FLAGS=(--innodb-buffer-pool-size=32M --innodb-log-file-size=16M --innodb-log-buffer-size=4M
  --innodb-flush-log-at-trx-commit=2 --innodb-doublewrite=0 --innodb-use-native-aio=0
  --skip-name-resolve)
start_mariadb() {
  local dir=$WORK/mariadb; mkdir -p "$dir"
  local user_flag=(); [[ $(id -u) == 0 ]] && user_flag=(--user=root)
  mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
    --skip-test-db "${user_flag[@]}" "${INNODB_FLAGS[@]}" >"$dir/install-db.log" 2>&1 \
    || die "mariadb-install-db failed: $(cat "$dir/install-db.log")"
  MYSQL_PORT=$(free_port)
  MYSQL_SOCKET=$dir/mysqld.sock
  mariadbd --no-defaults --datadir="$dir/data" --port="$MYSQL_PORT" --bind-address=127.0.0.1 \
    --socket="$MYSQL_SOCKET" --pid-file="$dir/mysqld.pid" --tmpdir="$dir" --max-connections=1000 \
    --performance-schema=OFF --skip-log-bin "${user_flag[@]}" "${INNODB_FLAGS[@]}" \
    >"$dir/mariadbd.log" 2>&1 &
  MYSQL_PID=$!; PIDS+=("$MYSQL_PID")
  wait_for 60 grep -q "ready for connections" "$dir/mariadbd.log" \
    || die "mariadbd did not start: $(tail -20 "$dir/mariadbd.log")"
  MYSQL_PASSWORD_FILE=$dir/password
  local password; password=$(python3 -c 'import secrets; print(secrets.token_hex(12))')
  echo "$password" >"$MYSQL_PASSWORD_FILE"
  local sql="CREATE DATABASE IF NOT EXISTS lockd;"
  for host in % localhost; do
    sql+="CREATE USER IF NOT EXISTS 'lockd'@'$host' IDENTIFIED BY '$password';"
    sql+="GRANT ALL PRIVILEGES ON lockd.* TO 'lockd'@'$host';"
  done
  mariadb --no-defaults --protocol=socket --socket="$MYSQL_SOCKET" --user=root --batch -e "$sql" \
    || die "cannot create the lockd database user"
  log "mariadbd on 127.0.0.1:$MYSQL_PORT (pid $MYSQL_PID)"
}

# zk_java MAIN_CLASS ARGS... &: runs a ZooKeeper server class with Debian's
# jars (as tests/support/zookeeper_server.cc does). Run it in the background:
# it execs java, so that $! is the server's pid.
zk_java() {
  local cp="" jar
  for jar in zookeeper zookeeper-jute slf4j-api slf4j-simple commons-cli commons-io metrics-core \
    snappy-java netty-buffer netty-codec netty-common netty-handler netty-resolver \
    netty-transport netty-transport-native-epoll netty-transport-native-unix-common; do
    [[ -r /usr/share/java/$jar.jar ]] && cp+="${cp:+:}/usr/share/java/$jar.jar"
  done
  exec java -Xmx512m -XX:+UseSerialGC -XX:-UsePerfData -Djava.net.preferIPv4Stack=true \
    -Dorg.slf4j.simpleLogger.showDateTime=true -cp "$cp" "$@"
}

# zk_ok PORT: the ZooKeeper server on PORT serves requests ("srvr" names its
# mode; a member of an ensemble without a quorum answers that it is not
# serving, though "ruok" would still say imok). A server still starting may
# take the connection and never answer: each probe gets 2 s.
zk_ok() {
  [[ $(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/"$1" && printf srvr >&3 && cat <&3' _ "$1") == *"Mode: "* ]]
}

# CPU time (user+system, in clock ticks) a process has used so far; 0 if none.
cpu_ticks() { [[ -n ${1:-} && -r /proc/$1/stat ]] && awk '{print $14+$15}' "/proc/$1/stat" || echo 0; }
TICK=$(getconf CLK_TCK)

# ZooKeeper, as tests/support/zookeeper_server.cc starts it (Debian's jars).
start_zookeeper() {
  local dir=$WORK/zookeeper; mkdir -p "$dir/data"
  ZK_PORT=$(free_port)
  cat >"$dir/zoo.cfg" <<EOF
tickTime=100
dataDir=$dir/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=200
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=*
forceSync=no
EOF
  zk_java org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" >"$dir/zookeeper.log" 2>&1 &
  ZK_PID=$!; PIDS+=("$ZK_PID")
  wait_for 120 zk_ok "$ZK_PORT" || die "ZooKeeper did not start: $(tail -20 "$dir/zookeeper.log")"
  log "ZooKeeper on 127.0.0.1:$ZK_PORT (pid $ZK_PID)"
}

# start_lockd BACKEND: sets LOCKD_PORT, LOCKD_PID.
start_lockd() {
  local backend=$1 flags=()
  case $backend in
    memory) flags=(--backend=memory) ;;
    redis) flags=(--backend=redis "--redis.addresses=127.0.0.1:$REDIS_PORT") ;;
    mysql) flags=(--backend=mysql --mysql.host=127.0.0.1 "--mysql.port=$MYSQL_PORT" --mysql.user=lockd
                  "--mysql.password_file=$MYSQL_PASSWORD_FILE" --mysql.database=lockd) ;;
    zookeeper) flags=(--backend=zookeeper "--zookeeper.hosts=127.0.0.1:$ZK_PORT") ;;
  esac
  # shellcheck disable=SC2206
  [[ -n ${LOCKD_EXTRA_FLAGS:-} ]] && flags+=($LOCKD_EXTRA_FLAGS)
  LOCKD_PORT=$(free_port)
  LOCKD_LOG=$WORK/lockd-$backend.log
  LOCKD_CMD="lockd --listen=127.0.0.1:$LOCKD_PORT ${flags[*]}"
  "$LOCKD" "--listen=127.0.0.1:$LOCKD_PORT" "${flags[@]}" >"$LOCKD_LOG" 2>&1 &
  LOCKD_PID=$!; PIDS+=("$LOCKD_PID")
  wait_for 60 grep -q "lockd serving on" "$LOCKD_LOG" || die "lockd ($backend) did not start: $(cat "$LOCKD_LOG")"
  echo "$LOCKD_CMD" >>"$OUT/commands.txt"
  log "lockd backend=$backend on 127.0.0.1:$LOCKD_PORT (pid $LOCKD_PID)"
}

stop_lockd() {
  kill -TERM "$LOCKD_PID" 2>/dev/null || true
  wait "$LOCKD_PID" 2>/dev/null || true
}

# bench_json RESULTS LABEL REP LOCKBENCH_ARGS...: one lockbench run (--json)
# against the running lockd; its JSON object, with "label", "rep" and the
# 1-minute load average before it ("load1_before") added, is appended to
# RESULTS, its command line to $OUT/commands.txt. A run that printed nothing
# appends {"label", "rep", "failed": true, "exit"} instead. With CPU_PIDS
# set ("name=PID ..."), the object also gets the CPU seconds lockbench
# ("cpu_client_s") and each named process ("cpu_NAME_s") used during the run.
bench_json() {
  local results=$1 label=$2 rep=$3; shift 3
  local load out rc=0 spec cpu="" ticks=()
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "lockbench $*" >>"$OUT/commands.txt"
  local timer=()
  if [[ -n ${CPU_PIDS:-} ]]; then
    timer=(/usr/bin/time -f "%U %S" -o "$WORK/time.txt")
    for spec in $CPU_PIDS; do ticks+=("$(cpu_ticks "${spec#*=}")"); done
  fi
  out=$("${timer[@]}" "$LOCKBENCH" "$@" --json 2>>"$OUT/lockbench.stderr") || rc=$?
  if [[ -n ${CPU_PIDS:-} ]]; then
    local i=0
    for spec in $CPU_PIDS; do
      cpu+="$(awk -v n="${spec%%=*}" -v d=$(($(cpu_ticks "${spec#*=}") - ticks[i])) -v t="$TICK" \
        'BEGIN {printf "\"cpu_%s_s\": %.2f,", n, d / t}') "
      i=$((i + 1))
    done
    cpu+="$(awk '{printf "\"cpu_client_s\": %.2f,", $1 + $2}' "$WORK/time.txt" 2>/dev/null || true) "
  fi
  if [[ -z $out ]]; then
    log "  $label rep $rep FAILED (exit $rc): $(tail -1 "$OUT/lockbench.stderr")"
    echo "{\"label\": \"$label\", \"rep\": $rep, \"failed\": true, \"exit\": $rc}" >>"$results"
    return 0
  fi
  echo "$out" | sed "s/^{/{\"label\": \"$label\", \"rep\": $rep, \"load1_before\": $load, \"exit\": $rc, $cpu/" >>"$results"
  log "  $label rep $rep: $(echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
keys = ["backend", "scenario", "cs_per_s", "pairs_per_s", "acquire_p99_ms", "fairness",
        "max_concurrent_readers", "max_permits_held", "wait_timeouts", "lost_updates",
        "exclusion_violations", "errors", "ok"]
print(" ".join("%s=%s" % (k, round(r[k], 3) if isinstance(r[k], float) else r[k]) for k in keys if k in r))')"
}

# start_servers BACKEND / stop_servers BACKEND: the servers a backend needs
# besides the Redis every script starts (MariaDB for mysql, ZooKeeper for
# zookeeper; none for memory and redis).
start_servers() {
  case $1 in
    mysql) start_mariadb ;;
    zookeeper) start_zookeeper ;;
  esac
}
stop_servers() {
  case $1 in
    mysql) kill -TERM "$MYSQL_PID"; wait "$MYSQL_PID" 2>/dev/null || true ;;
    zookeeper) kill -TERM "$ZK_PID"; wait "$ZK_PID" 2>/dev/null || true ;;
  esac
}

# build_release BUILD_DIR SOURCE_DIR JOBS TARGET...: a Release build of the
# targets (configured on first use).
build_release() {
  local build=$1 src=$2 jobs=$3; shift 3
  if [[ ! -f $build/CMakeCache.txt ]]; then
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
  cmake --build "$build" -j"$jobs" --target "$@" >&2
}

# export_commit SHA DIR: the tree of commit SHA in DIR/src (git archive; no
# git worktree is registered), once; DIR/src/.source-commit names it.
export_commit() {
  local sha=$1 dir=$2
  [[ -f $dir/src/.source-commit ]] && return 0
  log "exporting ${sha:0:7} into $dir/src"
  rm -rf "$dir/src"; mkdir -p "$dir/src"
  git -C "$ROOT" archive "$sha" | tar -x -C "$dir/src"
  echo "${sha:0:7}" >"$dir/src/.source-commit"
}
