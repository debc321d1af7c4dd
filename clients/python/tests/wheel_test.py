#!/usr/bin/python3
"""Runs the client's test suite the way users get the client: as a wheel.

Builds the wheel from a copy of clients/python and protos/ (the repository's
layout, so the source tree gets no build/ or *.egg-info) with the offline
command of docs/clients/python.md, installs it into a fresh
`python3 -m venv --system-site-packages` (grpcio and protobuf come from
Debian's python3-grpcio and python3-protobuf, which must satisfy the wheel's
declared dependencies: pip checks them, no --no-deps), and runs
tests/test_client.py, tests/test_session.py, tests/test_kinds.py,
tests/test_replicas.py (which needs redis-server) and
tests/test_lease_validity.py (the shared vectors in clients/testdata) with
the venv's python from a
directory that holds no `lockd` package, after checking that `import lockd`
resolves into the venv.

Usage: wheel_test.py --source-dir REPO --version X.Y.Z   ($LOCKD_BINARY: lockd)
Run by ctest as lockd_python_wheel_test (clients/python/CMakeLists.txt).
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

SYSTEM_PYTHON = "/usr/bin/python3"


def run(cmd, **kwargs):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def fail(message):
    print("wheel_test: FAIL: " + message, file=sys.stderr)
    sys.exit(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source-dir", required=True, help="the repository's top directory")
    parser.add_argument("--version", required=True, help="the CMake project's VERSION")
    args = parser.parse_args()
    client_src = os.path.join(args.source_dir, "clients", "python")
    with open(os.path.join(args.source_dir, "VERSION")) as f:
        version_file = f.read().strip()
    if args.version != version_file:
        fail("CMake's PROJECT_VERSION %s is not the VERSION file's %s" % (args.version, version_file))

    # Only the wheel and Debian's packages: no package index, no find-links,
    # no PYTHONPATH into a build tree.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    if glob.glob(os.path.join(client_src, "lockd", "**", "*_pb2*.py"), recursive=True):
        fail("generated stubs in the source tree (%s/lockd)" % client_src)

    tmp = tempfile.mkdtemp(prefix="lockd-wheel-test-")
    try:
        tree = os.path.join(tmp, "src")
        shutil.copytree(client_src, os.path.join(tree, "clients", "python"),
                        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
        shutil.copytree(os.path.join(args.source_dir, "protos"), os.path.join(tree, "protos"))
        dist = os.path.join(tmp, "dist")
        run([SYSTEM_PYTHON, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
             "--no-index", "-w", dist, os.path.join(tree, "clients", "python")], env=env, cwd=tree)

        wheels = os.listdir(dist)
        expected = "lockd_client-%s-py3-none-any.whl" % args.version
        if wheels != [expected]:
            fail("built %s, expected [%s] (lockd.__version__ vs the VERSION file)" %
                 (wheels, expected))
        wheel = os.path.join(dist, expected)
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
        for stub in ("lockd/_proto/lockd/v1/lock_pb2.py", "lockd/_proto/lockd/v1/lock_pb2_grpc.py",
                     "lockd/_proto/google/rpc/status_pb2.py"):
            if stub not in names:
                fail("wheel lacks %s" % stub)

        venv = os.path.join(tmp, "venv")
        run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", venv], env=env)
        python = os.path.join(venv, "bin", "python")
        run([os.path.join(venv, "bin", "pip"), "install", "--no-index", wheel], env=env, cwd=tmp)

        tests = os.path.join(client_src, "tests")  # on sys.path; holds no `lockd`
        where = subprocess.run([python, "-c", "import lockd; print(lockd.__file__)"], env=env,
                               cwd=tests, check=True, stdout=subprocess.PIPE, text=True).stdout
        site = os.path.realpath(os.path.join(venv, "lib"))
        if not os.path.realpath(where.strip()).startswith(site + os.sep):
            fail("`import lockd` found %s, not the package installed in %s" % (where, venv))
        print("import lockd ->", where.strip(), flush=True)

        run([python, "-m", "unittest", "-v", "test_client", "test_session", "test_replicas",
             "test_lease_validity", "test_kinds"], env=env, cwd=tests)
    except subprocess.CalledProcessError as e:
        fail("%s exited %d" % (" ".join(e.cmd), e.returncode))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("wheel_test: the installed wheel passed the client suite")
    return 0


if __name__ == "__main__":
    sys.exit(main())
