# Shared by bench/run.sh and bench/profile.sh (sourced, not run). Set
# WORK_NAME first: this makes $WORK, a temporary directory, and on exit kills
# every process whose pid is in PIDS and removes $WORK.

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
