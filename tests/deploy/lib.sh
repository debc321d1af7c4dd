# Shared by the deploy test scripts (sourced, not run).
#
# podman here runs as root with runc (--runtime runc), and containers must not
# ask for rlimits: the machines this suite runs on may not let a process raise
# them, and podman's default containers.conf sets nofile/nproc ulimits. A
# containers.conf of our own, passed through CONTAINERS_CONF, empties
# default_ulimits and names runc for builds, runs and kube play alike.

DEPLOY_CACHE=${DEPLOY_CACHE:-/var/tmp/lockd-deploy-tests}
mkdir -p "$DEPLOY_CACHE"
export CONTAINERS_CONF="$DEPLOY_CACHE/containers.conf"
if [ ! -s "$CONTAINERS_CONF" ]; then
  printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$CONTAINERS_CONF.$$"
  mv "$CONTAINERS_CONF.$$" "$CONTAINERS_CONF"
fi

# The mmdebstrap-made stand-ins for debian:bookworm and debian:bookworm-slim
# (no registry is reachable here): see base-images.sh.
BASE_BUILD_IMAGE=localhost/lockd-test-base/debian:bookworm
BASE_RUNTIME_IMAGE=localhost/lockd-test-base/debian:bookworm-slim

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
