#!/usr/bin/env bash
# The one entry point of the proto toolchain (buf.yaml, buf.gen.yaml; C++
# stays on CMake):
#
#   protos/generate.sh BUILD_DIR [go|java|all]   generate stubs (default all)
#   protos/generate.sh BUILD_DIR check           lint, breaking check, Go stubs current
#   protos/generate.sh BUILD_DIR image FILE      the buf image of protos/ into FILE
#
# go    regenerates clients/go/lockdv1 (committed: a Go module ships source).
# java  generates BUILD_DIR/gen/java (messages and gRPC stubs, io.lockd.v1),
#       which the Java build adds as a source root.
# check `buf lint`; `buf breaking` (WIRE_JSON) against the last release's image
#       protos/releases/lockd-<last>.binpb; proof on a temporary copy that the
#       breaking check fails on a renumbered field; and clients/go/lockdv1
#       equal to what buf generates now. Exits non-zero naming what failed.
# image a release's image (scripts/release.sh; protos/releases/README.md).
#
# Installs what the languages asked need, pinned, under BUILD_DIR/tools (buf
# from npm; protoc-gen-go and protoc-gen-go-grpc with `go install`; protoc and
# protoc-gen-grpc-java executables from Maven Central through mvn), and no
# more. Idempotent: an up-to-date language (same protos, templates and tool
# versions as its last run, stamp in BUILD_DIR/gen) is skipped, so a repeated
# call takes about a second. Concurrent callers on one BUILD_DIR (the clients'
# prepare.sh scripts run side by side) are serialized by a lock file.
set -euo pipefail

BUF_VERSION=1.75.0               # npm @bufbuild/buf
PROTOC_GEN_GO_VERSION=v1.36.12   # google.golang.org/protobuf (the Go client's runtime)
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2  # google.golang.org/grpc/cmd/protoc-gen-go-grpc
# protoc for Java at clients/java's protobuf-java version (gencode needs a
# runtime of the same major version, not older).
PROTOC_VERSION=4.33.5
# grpc-java's plugin: Maven Central serves executables up to 1.83.1 (not
# 1.84.x or 1.85.x); stubs made by an older plugin run on a newer grpc-java.
GRPC_JAVA_VERSION=1.83.1
MAVEN_DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

usage() { echo "usage: protos/generate.sh BUILD_DIR [go|java|all|check|image FILE]" >&2; exit 64; }
[ $# -ge 1 ] && [ $# -le 3 ] || usage
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
mode=${2:-all}
case "$mode" in
  go) langs=(go) ;;
  java) langs=(java) ;;
  all) langs=(go java) ;;
  check) langs=() ;;
  image) [ $# = 3 ] || usage; langs=() ;;
  *) usage ;;
esac
[ "$mode" = image ] || [ $# -le 2 ] || usage
tools=$build/tools
log() { echo "protos/generate.sh: $*" >&2; }
die() { log "$*"; exit 1; }

mkdir -p "$tools" "$build/gen"
exec 9>"$tools/.lock"
flock 9

# --- tools, each in a directory named by its version --------------------
buf_dir=$tools/buf-$BUF_VERSION
buf=$buf_dir/node_modules/.bin/buf
install_buf() {
  [ -x "$buf" ] && return
  command -v npm >/dev/null || die "npm is missing (Node.js with npm installs buf)"
  log "installing buf $BUF_VERSION from npm"
  rm -rf "$buf_dir"
  npm install --prefix "$buf_dir" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error "@bufbuild/buf@$BUF_VERSION" >&2
  [ -x "$buf" ] || die "npm installed no $buf"
}

go_bin=$tools/go-$PROTOC_GEN_GO_VERSION-grpc-$PROTOC_GEN_GO_GRPC_VERSION/bin
install_go_plugins() {
  [ -x "$go_bin/protoc-gen-go" ] && [ -x "$go_bin/protoc-gen-go-grpc" ] && return
  command -v go >/dev/null || die "go is missing (it installs protoc-gen-go)"
  log "installing protoc-gen-go $PROTOC_GEN_GO_VERSION, protoc-gen-go-grpc $PROTOC_GEN_GO_GRPC_VERSION"
  GOBIN=$go_bin go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN=$go_bin go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
}

java_bin=$tools/protoc-$PROTOC_VERSION-grpc-java-$GRPC_JAVA_VERSION/bin
# maven_exe GROUP:ARTIFACT:VERSION NAME: the linux-x86_64 executable of that
# artifact, from Maven Central through mvn (and ~/.m2), as $java_bin/NAME.
maven_exe() {
  local dl=$tools/maven-download
  rm -rf "$dl"
  # mvn's output only when it fails (Maven 3.8 writes color codes even when quiet).
  if ! mvn -q -B "$MAVEN_DEPENDENCY_PLUGIN:copy" -Dartifact="$1:exe:linux-x86_64" \
    -DoutputDirectory="$dl" -Dmdep.stripVersion=true >"$dl.log" 2>&1; then
    cat "$dl.log" >&2
    die "mvn could not fetch $1 (exe, linux-x86_64) from Maven Central"
  fi
  mkdir -p "$java_bin"
  install -m 755 "$dl"/*.exe "$java_bin/$2"
  rm -rf "$dl" "$dl.log"
}
install_java_plugins() {
  [ -x "$java_bin/protoc" ] && [ -x "$java_bin/protoc-gen-grpc-java" ] && return
  [ "$(uname -m)" = x86_64 ] || die "the Java plugins are fetched for linux-x86_64 only"
  command -v mvn >/dev/null || die "mvn is missing (it fetches protoc and protoc-gen-grpc-java)"
  log "installing protoc $PROTOC_VERSION, protoc-gen-grpc-java $GRPC_JAVA_VERSION from Maven Central"
  maven_exe "com.google.protobuf:protoc:$PROTOC_VERSION" protoc
  maven_exe "io.grpc:protoc-gen-grpc-java:$GRPC_JAVA_VERSION" protoc-gen-grpc-java
}

# --- generation ----------------------------------------------------------
# template LANG: buf.gen.yaml with only LANG's plugins (those whose `out` is
# LANG or under LANG/), as data for `buf generate --template`.
template() {
  awk -v lang="$1" '
    /^plugins:/ { print; inplugins = 1; next }
    !inplugins { print; next }
    /^  - / { flush(); block = "" }
    /^    out: / { keep = ($2 == lang || index($2, lang "/") == 1) }
    { block = block $0 "\n" }
    function flush() { if (keep) printf "%s", block; keep = 0 }
    END { flush() }' "$root/buf.gen.yaml"
}

# buf_generate LANG OUT_BASE: LANG's stubs under OUT_BASE/LANG/..., the
# directories written first emptied.
buf_generate() {
  local tmpl
  tmpl=$(template "$1")
  sed -n '/^plugins:/,$p' <<<"$tmpl" | grep -q '^  - ' ||
    die "buf.gen.yaml has no plugin with out: $1"
  (cd "$root" && PATH="$go_bin:$java_bin:$PATH" "$buf" generate --clean \
    --template "$tmpl" -o "$2")
}

# The inputs of LANG's stubs; a change in any of them regenerates.
fingerprint() {
  (cd "$root" && cat buf.yaml buf.gen.yaml protos/generate.sh \
    $(find protos -name '*.proto' | LC_ALL=C sort)) | sha256sum | cut -d' ' -f1
}

generate() {
  local lang=$1 base made stamp
  case "$lang" in
    go) base=$root/clients made=$root/clients/go/lockdv1 ;;
    java) base=$build/gen made=$build/gen/java ;;
  esac
  stamp=$build/gen/.stamp-$lang
  if [ -d "$made" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$(fingerprint)" ]; then
    return
  fi
  install_buf
  "install_${lang}_plugins"
  log "generating $lang stubs into $made"
  buf_generate "$lang" "$base"
  fingerprint >"$stamp"
}

check() {
  install_buf
  install_go_plugins
  local failed=0 releases last
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cd "$root"

  log "buf lint"
  "$buf" lint || { log "FAIL: buf lint (see above)"; failed=1; }

  releases=$(find protos/releases -name 'lockd-*.binpb' | sort -V)
  [ -n "$releases" ] || die "FAIL: no release image protos/releases/lockd-*.binpb"
  last=$(tail -n1 <<<"$releases")
  log "buf breaking --against $last"
  "$buf" breaking --against "$last" ||
    { log "FAIL: protos/ break wire or JSON compatibility with $last (see above)"; failed=1; }

  # The check must be able to fail: renumber a field in a copy.
  cp -r buf.yaml protos "$tmp/"
  sed -i 's/^\(  string namespace = \)1;/\199;/' "$tmp/protos/lockd/v1/lock.proto"
  if cmp -s protos/lockd/v1/lock.proto "$tmp/protos/lockd/v1/lock.proto"; then
    log "FAIL: found no 'string namespace = 1;' to renumber in a copy of lock.proto"
    failed=1
  elif (cd "$tmp" && "$buf" breaking --against "$root/$last" >/dev/null 2>&1); then
    log "FAIL: buf breaking accepted a renumbered field (namespace = 99)"
    failed=1
  fi

  log "clients/go/lockdv1 against buf generate"
  buf_generate go "$tmp/gen"
  if ! diff -rq "$tmp/gen/go/lockdv1" clients/go/lockdv1 >/dev/null; then
    diff -ru "$tmp/gen/go/lockdv1" clients/go/lockdv1 | head -n 40 || true
    log "FAIL: clients/go/lockdv1 is stale; regenerate it with" \
      "$root/protos/generate.sh $build go and commit the result"
    failed=1
  fi
  [ "$failed" = 0 ] && log "OK: lint, breaking, Go stubs current"
  return "$failed"
}

# The image a release commits as protos/releases/lockd-VERSION.binpb: every
# file of the module and its imports, without source info (buf breaking
# compares descriptors only). buf's output is byte-for-byte reproducible.
image() {
  install_buf
  (cd "$root" && "$buf" build --exclude-source-info -o "$1")
}

case "$mode" in
  check) check; exit ;;
  image) image "$(realpath -m "$3")"; exit ;;
esac
for lang in "${langs[@]}"; do
  generate "$lang"
done
