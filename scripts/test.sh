#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. installs what is missing (Debian 12 packages, including the Redis,
#      MariaDB and ZooKeeper servers the tests start themselves on free
#      loopback ports in temporary directories);
#   2. checks formatting with clang-format;
#   3. builds everything with -Werror, checks the lock annotations with
#      clang's -Wthread-safety (scripts/check-thread-safety.sh), and runs
#      every test (unit, conformance against each backend's real server,
#      integration, Python clients, and the deploy tests: Helm chart,
#      container image, pods run by podman);
#   4. rebuilds the unit and conformance tests under AddressSanitizer +
#      UndefinedBehaviorSanitizer (at -O1) and runs them.
# Both trees (build/ci, build/asan) keep line tables only (-g1): backtraces
# and sanitizer reports still name file, line and inlined frames, but there is
# no variable info for a debugger, and compiling costs about a quarter less.
# A developer's build (README, "Development") keeps CMake's full -g.
# Exits non-zero if anything fails. Options: --fast skips step 4.
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

config=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKD_WERROR=ON)

step "build (-Werror)"
cmake -S . -B build/ci "${config[@]}" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" >/dev/null
cmake --build build/ci -j "$JOBS"

step "clang -Wthread-safety -Werror"
scripts/check-thread-safety.sh build/ci

step "all tests"
(cd build/ci && ctest -j "$JOBS" --output-on-failure --timeout 900)

if [ "$FAST" -eq 0 ]; then
  step "unit and conformance tests under ASan+UBSan"
  cmake -S . -B build/asan "${config[@]}" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
        -DLOCKD_SANITIZER=address >/dev/null
  cmake --build build/asan -j "$JOBS" --target sanitizer_tests
  (cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest -j "$JOBS" -L 'unit|conformance' --output-on-failure --timeout 900)
fi

step "all tests passed"
