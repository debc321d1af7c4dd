#!/usr/bin/env bash
# Builds everything a user installs, for version VERSION, into OUT_DIR
# (default build/release/VERSION), then checks that the artifacts work:
#
#   scripts/release.sh 0.1.0 [--out DIR] [--tag IMAGE] [--local-bases] [--allow-dirty] [--no-verify]
#
# Artifacts:
#   lockd-VERSION-image.oci.tar       the container image (deploy/Dockerfile) as
#                                     an OCI archive (`podman load -i`)
#   lockd-VERSION-image.sbom.spdx.json  its SBOM: every Debian package of the
#                                     image's root filesystem, and lockd (SPDX 2.3)
#   lockd-CHART_VERSION.tgz           the Helm chart (`helm package`), with its
#                                     values schema
#   lockd_client-VERSION-*.whl, lockd_client-VERSION.tar.gz
#                                     the Python client's wheel and sdist
#   lockd-VERSION-linux-ARCH.tar.gz   lockd and lockctl for this architecture
#                                     (the image's binaries; they need Debian
#                                     12's runtime packages, listed inside)
#   lockd-VERSION.binpb               the API's buf image (protos/), which must
#                                     equal the committed
#                                     protos/releases/lockd-VERSION.binpb: the
#                                     next release's breaking check reads it
#   SHA256SUMS                        `sha256sum -c SHA256SUMS` checks them
# (Java jars join the list once the project has a Java client.)
#
# Verify (skipped with --no-verify): the image archive is loaded into podman
# and the packaged chart's pods run from it with `podman kube play`
# (tests/deploy/kube_play_test.py, with the chart package instead of the
# chart folder); the wheel is installed into a fresh venv and imported; the
# tarball's binaries print VERSION.
#
# VERSION must equal the VERSION file (bump it and commit first); the tree
# must be clean (--allow-dirty: for trying the script, never for a release).
# --tag names the image built (default localhost/lockd:VERSION; the test
# suite's run picks its own so as not to replace a user's image).
# --local-bases builds on the mmdebstrap stand-ins of the Debian base images
# (tests/deploy/base-images.sh) for machines without a registry. Nothing is
# pushed: docs/releasing.md says how a maintainer publishes the artifacts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${1:?usage: scripts/release.sh VERSION [--out DIR] [--tag IMAGE] [--local-bases] [--allow-dirty] [--no-verify]}
shift
out="$root/build/release/$version"
image="localhost/lockd:$version"
local_bases=0 allow_dirty=0 verify=1
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --tag) image=$2; shift 2 ;;
    --local-bases) local_bases=1; shift ;;
    --allow-dirty) allow_dirty=1; shift ;;
    --no-verify) verify=0; shift ;;
    *) echo "release.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done
log() { echo "[$(date +%H:%M:%S)] release: $*" >&2; }
die() { echo "release.sh: $*" >&2; exit 1; }

[ "$version" = "$(tr -d '[:space:]' <"$root/VERSION")" ] ||
  die "VERSION is $(cat "$root/VERSION"), not $version: bump the VERSION file and commit first"
if [ "$allow_dirty" = 0 ] && [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
  die "the tree has uncommitted changes; a release is built from a clean tree"
fi
# podman settings and the base-image stand-ins of the deploy tests.
. "$root/tests/deploy/lib.sh"

rm -rf "$out"
mkdir -p "$out"
tools="$root/build/release-tools"
"$root/tests/deploy/setup-tools.sh" "$tools" >/dev/null
helm="$tools/bin/helm"
arch=$(dpkg --print-architecture)

# --- the API image (first: a missing one fails fast) --------------------------
log "API image"
"$root/protos/generate.sh" "$tools" image "$out/lockd-$version.binpb"
if ! cmp -s "$out/lockd-$version.binpb" "$root/protos/releases/lockd-$version.binpb"; then
  msg="protos/releases/lockd-$version.binpb is missing or differs from protos/; make it with
  protos/generate.sh BUILD_DIR image protos/releases/lockd-$version.binpb and commit it"
  if [ "$allow_dirty" = 1 ]; then log "warning: $msg"; else die "$msg"; fi
fi

# --- the image, its archive and SBOM ----------------------------------------
bases=()
if [ "$local_bases" = 1 ]; then
  "$root/tests/deploy/base-images.sh"
  bases=(--build-arg BUILD_IMAGE="$BASE_BUILD_IMAGE" --build-arg RUNTIME_IMAGE="$BASE_RUNTIME_IMAGE")
fi
log "image $image"
"$root/deploy/build-image.sh" --tag "$image" -- --quiet "${bases[@]}" >/dev/null
podman save --quiet --format oci-archive --output "$out/lockd-$version-image.oci.tar" "$image"
log "SBOM"
podman run --rm --entrypoint dpkg-query "$image" \
    --show --showformat '${Package}\t${Version}\t${Architecture}\n' |
  /usr/bin/python3 "$root/scripts/sbom.py" --name "lockd-$version-image" --version "$version" \
    --revision "$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)" \
    >"$out/lockd-$version-image.sbom.spdx.json"

# --- lockd and lockctl, as built into the image -----------------------------
log "binaries"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
dist="$stage/lockd-$version-linux-$arch"
mkdir -p "$dist/bin"
ctr=$(podman create --quiet "$image")
podman cp "$ctr:/usr/bin/lockd" "$dist/bin/lockd"
podman cp "$ctr:/usr/bin/lockctl" "$dist/bin/lockctl"
podman rm --force "$ctr" >/dev/null
cp "$root/LICENSE" "$root/deploy/lockd.example.yaml" "$dist/"
# The Debian packages whose libraries the binaries load: the list the
# image's build made and installed (deploy/Dockerfile).
podman run --rm --entrypoint cat "$image" /usr/share/lockd/runtime-packages >"$dist/runtime-packages.txt"
cat >"$dist/README" <<EOF
lockd $version for Linux ($arch), built for Debian 12 (bookworm).
Install the runtime packages first:
  apt-get install \$(cat runtime-packages.txt)
Then: bin/lockd --help, bin/lockctl --help; lockd.example.yaml is a commented
configuration file. Licence: Apache-2.0 (LICENSE).
EOF
tar -C "$stage" -czf "$out/lockd-$version-linux-$arch.tar.gz" "lockd-$version-linux-$arch"

# --- the chart ---------------------------------------------------------------
log "chart"
"$helm" lint --quiet "$root/deploy/helm/lockd" >/dev/null
"$helm" package "$root/deploy/helm/lockd" --destination "$out" >/dev/null
chart=$(ls "$out"/lockd-*.tgz)

# --- the Python client -------------------------------------------------------
log "python wheel and sdist"
pysrc="$stage/python"
cp -rL "$root/clients/python" "$pysrc"  # -L: its LICENSE is a link to the root one
rm -rf "$pysrc/build" "$pysrc"/*.egg-info
cp -r "$root/protos" "$pysrc/protos"
/usr/bin/python3 -m pip wheel --quiet --no-build-isolation --no-deps "$pysrc" --wheel-dir "$out"
(cd "$pysrc" && /usr/bin/python3 setup.py --quiet sdist --dist-dir "$out" 2>/dev/null)

(cd "$out" && sha256sum -- * >SHA256SUMS)

if [ "$verify" = 1 ]; then
  log "verify: the tarball's binaries"
  tar -C "$stage" -xzf "$out/lockd-$version-linux-$arch.tar.gz" --one-top-level=unpacked
  for b in lockd lockctl; do
    "$stage/unpacked/lockd-$version-linux-$arch/bin/$b" --version | grep -q -- "$version" ||
      die "$b --version does not print $version"
  done
  grep -q '^libgrpc++' "$stage/unpacked/lockd-$version-linux-$arch/runtime-packages.txt" ||
    die "runtime-packages.txt does not list gRPC's package"
  log "verify: the wheel in a fresh venv"
  /usr/bin/python3 -m venv --system-site-packages "$stage/venv"
  "$stage/venv/bin/pip" install --quiet --no-index "$out"/lockd_client-"$version"-*.whl
  [ "$("$stage/venv/bin/python" -c 'import lockd; print(lockd.__version__)')" = "$version" ] ||
    die "the wheel's lockd.__version__ is not $version"
  log "verify: the image archive loaded into podman, the packaged chart's pods run from it"
  loaded="localhost/lockd-release-verify:$version"
  id=$(podman load --quiet --input "$out/lockd-$version-image.oci.tar" | sed -n 's/^Loaded image: //p' | tail -1)
  podman tag "$id" "$loaded"
  redis="localhost/lockd-release-verify-redis:$version"
  mkdir -p "$DEPLOY_CACHE/empty-context"
  "$root/tests/deploy/base-images.sh"
  podman build --quiet --file "$root/tests/deploy/redis.Containerfile" \
    --build-arg BASE_IMAGE="$BASE_RUNTIME_IMAGE" --tag "$redis" "$DEPLOY_CACHE/empty-context" >/dev/null
  stubs="$stage/stubs"  # the health check's, for the test's readiness wait
  mkdir -p "$stubs"
  /usr/bin/python3 -m grpc_tools.protoc -I /usr/share/grpc-proto/grpc/health/v1 \
    --python_out="$stubs" --grpc_python_out="$stubs" health.proto
  site=$("$stage/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$root/tests/deploy/kube_play_test.py" \
    --helm "$helm" --chart "$chart" --image "$loaded" --redis-image "$redis" \
    --stubs "$stubs" --client "$site"
  podman rmi --force "$loaded" "$redis" >/dev/null 2>&1 || true
fi

log "done: $out"
(cd "$out" && ls -l --time-style=+ -- * | awk '{print $5, $NF}' && cat SHA256SUMS) >&2
