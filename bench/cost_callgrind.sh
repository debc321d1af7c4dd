#!/usr/bin/env bash
# Instructions per uncontended acquire+release pair in lockd (memory backend),
# counted by valgrind's callgrind, with metrics + authorization off and on
# (bench/ops-on.yaml). Unlike throughput on a shared machine, instruction
# counts do not depend on what else runs. Prints one line per run.
# Usage: BUILD_DIR=build bench/cost_callgrind.sh   (MODES="off on on off")
#
# SCENARIO picks the load lockbench puts on lockd:
#   uncontended      (default) lockbench uncontended --clients=4: 4 clients,
#                    unary calls, each its own lock
#   service-session  lockbench service --api=session --threads=$THREADS: one
#                    lockd::Client shared by THREADS (default 64) threads,
#                    each its own lock, ops batched on one session stream
#   service-unary    the same through unary calls
# With a service scenario the batches a session carries depend on timing
# (lockd runs about 50x slower under callgrind, so they are fuller than on a
# real run); the counts per pair then vary by a few percent between runs.
# KEEP=DIR keeps each run's dump (DIR/cg.<scenario>.<mode>) for
# callgrind_annotate.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${BUILD_DIR:-$ROOT/build}
SCENARIO=${SCENARIO:-uncontended}
THREADS=${THREADS:-64}
case "$SCENARIO" in
  uncontended) run=(uncontended --clients=4) ;;
  service-session) run=(service --api=session --threads="$THREADS") ;;
  service-unary) run=(service --api=unary --threads="$THREADS") ;;
  *) echo "cost_callgrind.sh: unknown SCENARIO $SCENARIO" >&2; exit 2 ;;
esac
W=$(mktemp -d /tmp/lockd-cg.XXXX)
trap 'rm -rf "$W"' EXIT
for mode in ${MODES:-off on on off}; do
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  extra=()
  [[ $mode == on ]] && extra=(--config $ROOT/bench/ops-on.yaml)
  valgrind --tool=callgrind --callgrind-out-file="$W/cg.$mode.%p" "$B/service/lockd" \
    --listen=127.0.0.1:$port "${extra[@]}" >"$W/lockd.log" 2>&1 &
  pid=$!
  for i in $(seq 1 120); do grep -q "lockd serving on" "$W/lockd.log" && break; sleep 0.5; done
  "$B/tools/lockbench/lockbench" "${run[@]}" --target=127.0.0.1:$port --duration=3s >/dev/null 2>&1 || true
  callgrind_control -z $pid >/dev/null  # count only the measured run
  out=$("$B/tools/lockbench/lockbench" "${run[@]}" --target=127.0.0.1:$port --duration=10s --json 2>/dev/null)
  callgrind_control -d $pid >/dev/null
  sleep 1
  kill -TERM $pid; wait $pid || true
  pairs=$(echo "$out" | python3 -c 'import json,sys;print(json.load(sys.stdin)["pairs"])')
  f="$W/cg.$mode.$pid.1"  # the dump taken right after the run
  [[ -n ${KEEP:-} ]] && mkdir -p "$KEEP" && cp "$f" "$KEEP/cg.$SCENARIO.$mode"
  ir=$(grep -h "^summary:\|^totals:" $f | head -1 | awk '{print $2}')
  label=$mode
  [[ $SCENARIO != uncontended ]] && label="$SCENARIO $mode"
  echo "$label pairs=$pairs Ir=$ir Ir_per_pair=$(python3 -c "print(round($ir/$pairs))")"
done
