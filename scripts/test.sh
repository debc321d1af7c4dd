#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. installs what is missing (Debian 12 packages, including the Redis,
#      MariaDB and ZooKeeper servers the tests start themselves on free
#      loopback ports in temporary directories);
#   2. checks formatting with clang-format;
#   3. builds everything once, with -Werror, under AddressSanitizer +
#      UndefinedBehaviorSanitizer (at -O1, line tables only: -g1), and checks
#      the lock annotations with clang's -Wthread-safety
#      (scripts/check-thread-safety.sh);
#   4. runs every test on that build: unit, conformance against each
#      backend's real server, integration, Python clients, and the deploy
#      tests (Helm chart, container image, pods run by podman). The image
#      build compiles lockd and lockctl optimized (Release) with -Werror, so
#      warnings that only optimization reveals fail there.
# One build instead of an optimized one plus a sanitizer one: every test,
# not only the unit and conformance tests, runs under the sanitizers, and
# the suite compiles once.
# Exits non-zero if anything fails. Options: --fast builds without the
# sanitizers (-O2), for a quicker local run.
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
[ "${1:-}" = "--fast" ] && FAST=1
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)
step() { echo; echo "=== $* ($(( $(date +%s) - start ))s)"; }

step "install dependencies"
scripts/install-deps.sh

step "clang-format check"
files=$(git ls-files '*.cc' '*.h')
if ! clang-format --dry-run --Werror $files; then
  echo "clang-format: the files above need formatting (clang-format -i)"
  exit 1
fi

# Test code itself is compiled at -O0 without debug information
# (LOCKD_TEST_CXX_FLAGS; gtest's messages still name file and line): the
# code under test keeps the build type's flags, and the tests compile in
# about two thirds of the time.
config=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKD_WERROR=ON "-DLOCKD_TEST_CXX_FLAGS=-O0 -g0")
if [ "$FAST" -eq 0 ]; then
  config+=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DLOCKD_SANITIZER=address)
  what="ASan+UBSan, -Werror"
else
  config+=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DLOCKD_SANITIZER=)
  what="-O2, -Werror"
fi

step "build ($what)"
cmake -S . -B build/ci "${config[@]}" >/dev/null
cmake --build build/ci -j "$JOBS"

step "clang -Wthread-safety -Werror"
scripts/check-thread-safety.sh build/ci

step "all tests ($what)"
(cd build/ci && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   LSAN_OPTIONS="suppressions=$PWD/../../tests/lsan.supp" \
   ctest -j "$JOBS" --output-on-failure --timeout 300)

step "all tests passed"
