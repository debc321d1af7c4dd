#!/usr/bin/env bash
# The deploy tests' images, built the way users build theirs:
#   - lockd: deploy/build-image.sh (deploy/Dockerfile) on local stand-ins for
#     the public Debian bases (base-images.sh), tagged $1;
#   - Redis for the end-to-end test (redis.Containerfile), tagged $2.
# podman's layer cache makes a rebuild of unchanged sources take seconds.
# One build of these tags at a time: scripts/test.sh runs this script in the
# background while it compiles, and ctest's run of it then waits for that one
# and finds every layer cached.
set -euo pipefail
cd "$(dirname "$0")"
. ./lib.sh
lockd_tag=$1
redis_tag=$2

exec 8>"$DEPLOY_CACHE/images-$(echo "$lockd_tag" | tr -c 'A-Za-z0-9._\n-' _).lock"
if ! flock --nonblock 8; then
  log "image: waiting for another build of $lockd_tag"
  flock 8
fi

./base-images.sh
log "image: building $lockd_tag from deploy/Dockerfile"
../../deploy/build-image.sh --tag "$lockd_tag" -- --quiet \
  --build-arg BUILD_IMAGE="$BASE_BUILD_IMAGE" --build-arg RUNTIME_IMAGE="$BASE_RUNTIME_IMAGE"
log "image: building $redis_tag"
# It copies nothing in: an empty context keeps podman from reading this folder.
mkdir -p "$DEPLOY_CACHE/empty-context"
podman build --quiet --file "$PWD/redis.Containerfile" --build-arg BASE_IMAGE="$BASE_RUNTIME_IMAGE" \
  --tag "$redis_tag" "$DEPLOY_CACHE/empty-context" >/dev/null
log "image: done ($(podman image inspect --format '{{.Size}}' "$lockd_tag") bytes)"
