#!/usr/bin/env bash
# Runs the whole test suite, as CI does:
#   1. installs what is missing (Debian 12 packages, including the Redis,
#      MariaDB and ZooKeeper servers the tests start themselves on free
#      loopback ports in temporary directories);
#   2. checks formatting with clang-format;
#   3. builds everything once with clang, with -Werror, under
#      AddressSanitizer + UndefinedBehaviorSanitizer (at -O1, line tables
#      only: -g1); clang's -Wthread-safety checks the lock annotations in the
#      same compile (CMakeLists.txt adds it for clang);
#   4. runs every test on that build: unit, conformance against each
#      backend's real server, integration, Python clients, and the deploy
#      tests (Helm chart, container image, pods run by podman). The image
#      build compiles lockd and lockctl optimized (Release) with -Werror, so
#      warnings that only optimization reveals fail there.
# One build instead of an optimized one plus a sanitizer one: every test,
# not only the unit and conformance tests, runs under the sanitizers, and
# the suite compiles once. clang, not g++: it compiles this tree in about a
# fifth less CPU time, and its thread-safety analysis then costs nothing
# extra (a separate syntax-only pass cost a third of the build). g++ still
# compiles lockd and lockctl with -Werror in the image build.
#
# These steps run in the background, beside the others, because they need
# nothing the build makes:
#   - each language client's prepare step (clients/*/prepare.sh: toolchain,
#     stubs, compiled tests; joined before the tests);
#   - the deploy tests' images (ctest's deploy_images command, run early: a
#     first run on a machine downloads Debian's base system and the image's
#     build packages and compiles lockd in a container, which overlaps the
#     build here; ctest's deploy_images then waits for it and finds every
#     layer cached).
# Each step's start, end and duration (seconds since the start) are printed
# as it ends and in a table at the end, where overlapping steps show as
# overlapping intervals. A background step's output is in build/ci/steps/.
# Exits non-zero if anything fails. Options: --fast builds without the
# sanitizers (-O2), for a quicker local run.
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
[ "${1:-}" = "--fast" ] && FAST=1
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)
now() { echo $(($(date +%s) - start)); }

# Step bookkeeping: one row per step for the closing table.
rows=()
current="" current_start=0
end_step() {
  [ -n "$current" ] || return 0
  local t
  t=$(now)
  rows+=("$(printf '%6d %6d %6d  %s' "$current_start" "$t" $((t - current_start)) "$current")")
  echo "=== [${t}s] $current: $((t - current_start))s"
  current=""
}
step() {
  end_step
  current=$* current_start=$(now)
  echo
  echo "=== [${current_start}s] $current"
}
# bg NAME CMD...: runs CMD in the background, in its own process group (so
# that an early exit can stop it with everything it started), output to a
# log file; join NAME waits for it and prints that log.
declare -A bg_pid bg_start bg_log
bg() {
  local name=$1
  shift
  local id=${name%% (*}
  bg_log[$name]="build/ci/steps/${id// /-}.log"
  bg_start[$name]=$(now)
  rm -f "${bg_log[$name]}.end"
  # The command records when it ended: it may end long before it is joined.
  setsid --wait bash -c '"${@:2}"; rc=$?; date +%s >"$1"; exit $rc' bash "${bg_log[$name]}.end" "$@" \
    >"${bg_log[$name]}" 2>&1 </dev/null &
  bg_pid[$name]=$!
  echo "=== [${bg_start[$name]}s] started in the background: $name (log: ${bg_log[$name]})"
}
join() {
  local name=$1 rc=0 t
  wait "${bg_pid[$name]}" || rc=$?
  unset "bg_pid[$name]"
  t=$(($(cat "${bg_log[$name]}.end" 2>/dev/null || date +%s) - start))
  echo
  echo "=== [$(now)s] background step: $name"
  cat "${bg_log[$name]}"
  rows+=("$(printf '%6d %6d %6d  %s (background)' "${bg_start[$name]}" "$t" $((t - bg_start[$name])) "$name")")
  echo "=== [$(now)s] $name: $((t - bg_start[$name]))s (background, from ${bg_start[$name]}s to ${t}s)"
  return "$rc"
}
stop_background() {
  local pid
  for pid in "${bg_pid[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
}
trap stop_background EXIT

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
config=(-G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKD_WERROR=ON "-DLOCKD_TEST_CXX_FLAGS=-O0 -g0")
if [ "$FAST" -eq 0 ]; then
  config+=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DLOCKD_SANITIZER=address)
  what="clang, ASan+UBSan, -Werror"
else
  config+=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DLOCKD_SANITIZER=)
  what="-O2, -Werror"
fi

step "configure"
cmake -S . -B build/ci "${config[@]}" >/dev/null
mkdir -p build/ci/steps
# The deploy_images test's own command, as ctest registered it (its image
# tags are unique to this build directory).
mapfile -t images_cmd < <(cd build/ci && ctest --show-only=json-v1 -R '^deploy_images$' |
  /usr/bin/python3 -c 'import json, sys; [print(a) for t in json.load(sys.stdin)["tests"] for a in t["command"]]')
[ ${#images_cmd[@]} -gt 0 ] || { echo "test.sh: ctest has no deploy_images test" >&2; exit 1; }
bg "deploy images" "${images_cmd[@]}"

# Each language client's prepare step (clients/<language>/prepare.sh: its
# toolchain from the package registries, its stubs, its compiled tests) needs
# nothing the build makes: it runs beside the build, below its priority, and
# is joined before the tests, which run the client suites through ctest.
preps=()
for prep in clients/*/prepare.sh; do
  [ -x "$prep" ] || continue
  name="prepare $(basename "$(dirname "$prep")") client"
  bg "$name" bash -c 'echo 10 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 10 "$@"' bash \
    "$prep" "$PWD/build/ci"
  preps+=("$name")
done

step "build ($what)"
cmake --build build/ci -j "$JOBS"
end_step

failed=()
for name in "${preps[@]}"; do join "$name" || failed+=("$name"); done

step "all tests ($what)"
tests_rc=0
# Twice as many tests as cores at once: most of them wait on servers, timers
# and the network (at -j2 the machine stayed half idle; the long conformance
# and client suites take as long either way, and -j4 ends the phase in about
# 60% of the time).
(cd build/ci && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
   LSAN_OPTIONS="suppressions=$PWD/../../tests/lsan.supp" \
   ctest -j "$((JOBS * 2))" --output-on-failure --timeout 300) || tests_rc=$?
end_step

join "deploy images" || failed+=("deploy images")
[ "$tests_rc" -eq 0 ] || failed+=("tests")

echo
echo "=== step times (seconds since the start; background steps overlap the others)"
printf '%6s %6s %6s  %s\n' start end took step
printf '%s\n' "${rows[@]}" | sort -n -k1,1 -k2,2
echo "total: $(now)s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all tests passed"
