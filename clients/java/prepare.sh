#!/usr/bin/env bash
# clients/java/prepare.sh BUILD_DIR: everything the Java client's suite needs,
# nothing the C++ build makes. Generates the stubs (protos/generate.sh
# BUILD_DIR java -> BUILD_DIR/gen/java), then builds and installs every module
# with their compiled tests (`mvn install`, no test run; dependencies from Maven
# Central into ~/.m2). Outputs under BUILD_DIR/clients/java/<module>/, among
# them the jar a user installs: lockd-client/lockd-client-<version>.jar (also
# in ~/.m2/repository/io/lockd/). Idempotent: skipped when the sources and
# the stubs are those of its last run (a stamp in BUILD_DIR/clients/java).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: clients/java/prepare.sh BUILD_DIR" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
build=$(cd "$1" && pwd)
out=$build/clients/java
mkdir -p "$out"

"$root/protos/generate.sh" "$build" java

stamp=$out/.prepared
digest=$( (cd "$here" && find . -path ./target -prune -o -type f -print0 | sort -z | xargs -0 sha256sum;
           cd "$build/gen/java" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
  exit 0
fi
cd "$here"
# install with the tests compiled but none run (-Dtest=NoTest: surefire still
# resolves its JUnit provider, so that test.sh's `mvn -o test` finds it).
# Offline first (seconds once ~/.m2 has everything), else from Maven Central.
args=(-q -Dlockd.gen.dir="$build/gen/java" -Dlockd.out.dir="$out"
      -Dtest=NoTest -Dsurefire.failIfNoSpecifiedTests=false install)
if ! mvn -o "${args[@]}" > "$out/prepare-offline.log" 2>&1; then
  mvn "${args[@]}"
fi
echo "$digest" > "$stamp"
