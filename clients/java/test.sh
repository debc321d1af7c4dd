#!/usr/bin/env bash
# clients/java/test.sh BUILD_DIR: the Java client's suite (ctest
# java_client_test): prepare.sh, then every JUnit test of every module,
# offline, against $LOCKD_BINARY (and redis-server, which the tests start).
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: clients/java/test.sh BUILD_DIR" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
"$here/prepare.sh" "$1"
build=$(cd "$1" && pwd)
cd "$here"
exec mvn -o -q -Dlockd.gen.dir="$build/gen/java" -Dlockd.out.dir="$build/clients/java" \
  -Dsurefire.printSummary=true test
