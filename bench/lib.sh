# Shared by the scripts in bench/ (sourced, not run). Set WORK_NAME first:
# this makes $WORK, a temporary directory, and on exit kills every process
# whose pid is in PIDS and removes $WORK. Also: free_port, log/die, wait_for,
# start_redis, start_mariadb, zk_java/zk_ok (ZooKeeper servers) and
# cpu_ticks.

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
