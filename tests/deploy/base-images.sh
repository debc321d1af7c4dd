#!/usr/bin/env bash
# Makes local stand-ins for the public debian:bookworm and debian:bookworm-slim
# images, which deploy/Dockerfile builds on: no container registry is
# reachable where the tests run, Debian's package archive is. mmdebstrap
# builds a minimal bookworm root filesystem (apt, no documentation, as the
# -slim image has) and `podman import` turns it into an image, tagged as both
# bases: the build stage needs nothing more than apt either.
#
# Cached between runs: the images carry the hash of this script and are
# rebuilt when it changes or when they are older than a week (so the test
# does not drift far from the archive's security updates). A lock keeps two
# test runs from building them at once.
set -euo pipefail
cd "$(dirname "$0")"
. ./lib.sh

recipe=$(sha256sum base-images.sh | cut -c1-16)
max_age=$((7 * 24 * 3600))

fresh() {
  local label created
  label=$(podman image inspect --format '{{index .Labels "lockd.test.recipe"}}' "$1" 2>/dev/null) || return 1
  [ "$label" = "$recipe" ] || return 1
  created=$(podman image inspect --format '{{.Created.Unix}}' "$1")
  [ $(( $(date +%s) - created )) -lt "$max_age" ]
}

exec 9>"$DEPLOY_CACHE/base-images.lock"
flock 9
if fresh "$BASE_BUILD_IMAGE" && fresh "$BASE_RUNTIME_IMAGE"; then
  log "base images: cached ($BASE_RUNTIME_IMAGE, recipe $recipe)"
  exit 0
fi

tmp=$(mktemp -d "$DEPLOY_CACHE/rootfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log "base images: mmdebstrap bookworm (minbase, slim)"
# As in the official images: dpkg excludes of -slim, dpkg without fsync
# (force-unsafe-io, kept in the image, which speeds the builds on it), no
# translations, and apt's lists and package cache left empty.
mmdebstrap --variant=minbase --quiet \
  --dpkgopt='force-unsafe-io' \
  --aptopt='Acquire::Languages "none"' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  bookworm "$tmp/rootfs.tar"
podman import --quiet --change "LABEL lockd.test.recipe=$recipe" --change 'CMD ["bash"]' \
  "$tmp/rootfs.tar" "$BASE_RUNTIME_IMAGE" >/dev/null
podman tag "$BASE_RUNTIME_IMAGE" "$BASE_BUILD_IMAGE"
log "base images: built ($(podman image inspect --format '{{.Size}}' "$BASE_RUNTIME_IMAGE") bytes)"
