#!/usr/bin/env bash
# Checks lockd's lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED,
# ...) with clang's -Wthread-safety analysis, as errors.
#
# Usage: scripts/check-thread-safety.sh BUILD_DIR
#   BUILD_DIR is a configured CMake tree whose generated protobuf headers
#   exist (a build makes them first; scripts/test.sh makes only them and runs
#   this beside the build): its compile_commands.json names every source with
#   its flags. Our own translation units (not generated code) are compiled by
#   clang++ with -fsyntax-only: no objects are written, so nothing is shared
#   with or taken from the build. Exits non-zero if clang warns at all.
#
# Only translation units the analysis can say something about are compiled:
# those where the source file, or a project header it includes (followed
# through `#include "..."`, transitively), names a capability (absl::Mutex,
# absl::CondVar, the Mutex locks) or a thread-safety annotation. The others
# hold no lock and use no annotated declaration, so clang has nothing to check
# in them. A source compiled with the same flags for several targets (the
# conformance suite, once per backend) is checked once.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/check-thread-safety.sh BUILD_DIR}
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "check-thread-safety: $db not found (configure and build first)" >&2; exit 1; }
command -v clang++ >/dev/null || { echo "check-thread-safety: clang++ not found (scripts/install-deps.sh installs clang)" >&2; exit 1; }

/usr/bin/python3 - "$db" "$PWD" "${JOBS:-$(nproc)}" <<'PY'
import concurrent.futures, json, os, re, shlex, subprocess, sys

db, root, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])

# What makes a file relevant to the analysis: a capability type or an annotation.
LOCKING = re.compile(r"\babsl::(Mutex|MutexLock|ReaderMutexLock|WriterMutexLock|ReleasableMutexLock|CondVar)\b"
                     r"|\bABSL_[A-Z_]*(GUARDED_BY|LOCKS_|LOCK_|LOCKABLE|CAPABILITY|THREAD_SAFETY|ACQUIRED_|ASSERT_)")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
texts = {}


def text(path):
    if path not in texts:
        with open(path, errors="replace") as f:
            texts[path] = f.read()
    return texts[path]


def ours(path):
    return path.startswith(root + "/") and not path.startswith(root + "/build/")


def uses_locking(source, include_dirs):
    """Whether `source` or a project header it includes names a capability."""
    seen, todo = set(), [source]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if LOCKING.search(text(path)):
            return True
        for name in INCLUDE.findall(text(path)):
            for d in [os.path.dirname(path)] + include_dirs:
                candidate = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(candidate):
                    if ours(candidate):
                        todo.append(candidate)
                    break
    return False


units, seen_units, skipped = [], set(), 0
for e in json.load(open(db)):
    f = e["file"]
    if not ours(f) or f.endswith(".pb.cc"):
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
    key = (f, e["directory"], tuple(flags))
    if key in seen_units:
        continue
    seen_units.add(key)
    include_dirs = [os.path.join(e["directory"], a[2:]) for a in flags if a.startswith("-I") and len(a) > 2]
    if not uses_locking(f, include_dirs):
        skipped += 1
        continue
    cmd = ["clang++", "-fsyntax-only", "-Wthread-safety", "-Wthread-safety-beta", "-Werror"] + flags
    units.append((f, e["directory"], cmd))
print(f"check-thread-safety: {len(units)} translation units ({skipped} without locks skipped)", flush=True)


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
