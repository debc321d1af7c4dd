# Shared by the scripts in bench/ (sourced, not run). Set WORK_NAME first:
# this makes $WORK, a temporary directory, and on exit kills every process
# whose pid is in PIDS and removes $WORK. Also: free_port, log/die, wait_for,
# start_redis, zk_java/zk_ok (ZooKeeper servers) and cpu_ticks.

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

# zk_java MAIN_CLASS ARGS...: runs a ZooKeeper server class with Debian's jars
# (as tests/support/zookeeper_server.cc does).
zk_java() {
  local cp="" jar
  for jar in zookeeper zookeeper-jute slf4j-api slf4j-simple commons-cli commons-io metrics-core \
    snappy-java netty-buffer netty-codec netty-common netty-handler netty-resolver \
    netty-transport netty-transport-native-epoll netty-transport-native-unix-common; do
    [[ -r /usr/share/java/$jar.jar ]] && cp+="${cp:+:}/usr/share/java/$jar.jar"
  done
  java -Xmx512m -XX:+UseSerialGC -XX:-UsePerfData -Djava.net.preferIPv4Stack=true \
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
