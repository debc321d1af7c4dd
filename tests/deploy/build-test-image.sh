#!/usr/bin/env bash
# The deploy tests' images, built the way users build theirs:
#   - lockd: deploy/build-image.sh (deploy/Dockerfile) on local stand-ins for
#     the public Debian bases (base-images.sh), tagged $1;
#   - Redis for the end-to-end test (redis.Containerfile), tagged $2.
# podman's layer cache makes a rebuild of unchanged sources take seconds.
set -euo pipefail
cd "$(dirname "$0")"
. ./lib.sh
lockd_tag=$1
redis_tag=$2

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
