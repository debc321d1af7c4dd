#!/usr/bin/env bash
# Checks lockd's lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) with clang's -Wthread-safety analysis, as errors.
#
# Usage: scripts/check-thread-safety.sh BUILD_DIR
#   BUILD_DIR is a configured and built CMake tree: its compile_commands.json
#   names every source with its flags, and the build made the generated
#   protobuf headers. Each of our own translation units (not generated code)
#   is compiled again by clang++ with -fsyntax-only: no objects are written,
#   so this costs a fraction of a build. Exits non-zero if clang warns at all.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/check-thread-safety.sh BUILD_DIR}
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "check-thread-safety: $db not found (configure and build first)" >&2; exit 1; }
command -v clang++ >/dev/null || { echo "check-thread-safety: clang++ not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }

/usr/bin/python3 - "$db" "$PWD" "${JOBS:-$(nproc)}" <<'PY'
import concurrent.futures, json, shlex, subprocess, sys

db, root, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
units = []
for e in json.load(open(db)):
    f = e["file"]
    if not f.startswith(root + "/") or f.startswith(root + "/build/") or f.endswith(".pb.cc"):
        continue
    args = e.get("arguments") or shlex.split(e["command"])
    flags, skip = [], False
    for a in args[1:]:  # args[0] is the compiler; CMake leaves the launcher out
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and not a.startswith(("-fsanitize", "-fno-sanitize")):
            flags.append(a)
    cmd = ["clang++", "-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta", "-Werror"] + flags
    units.append((f, e["directory"], cmd))
print(f"check-thread-safety: {len(units)} translation units", flush=True)


def check(unit):
    f, cwd, cmd = unit
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return f, r.returncode, r.stderr


failed = 0
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    for f, rc, err in pool.map(check, units):
        if rc != 0 or err:
            failed += 1
            print(f"--- {f}\n{err}", flush=True)
if failed:
    sys.exit(f"check-thread-safety: {failed} translation units have warnings")
print("check-thread-safety: no warnings")
PY
