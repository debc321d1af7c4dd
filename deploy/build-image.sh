#!/usr/bin/env bash
# Builds lockd's container image from this checkout with podman:
#
#   deploy/build-image.sh                      # -> localhost/lockd:<version>
#   deploy/build-image.sh --tag registry.example.com/lockd:0.1.0
#   deploy/build-image.sh -- --build-arg BUILD_IMAGE=... --build-arg RUNTIME_IMAGE=...
#
# <version> is the project's version (the VERSION file). Arguments after `--`
# go to `podman build` unchanged (base images, --network, --no-cache, ...).
# JOBS (default 2) is the compile parallelism inside the build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(tr -d '[:space:]' <"$root/VERSION")
tag="localhost/lockd:$version"

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-image.sh: unknown argument $1 (podman build options go after --)" >&2; exit 64 ;;
  esac
done

# Labels say where the image came from; a checkout without git metadata
# (an exported tarball) still builds.
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
source=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)

exec podman build \
  --file "$root/deploy/Dockerfile" \
  --tag "$tag" \
  --build-arg VERSION="$version" \
  --build-arg REVISION="$revision" \
  --build-arg SOURCE="$source" \
  --build-arg JOBS="${JOBS:-2}" \
  "$@" \
  "$root"
