"""Runs the client examples of the documentation, so that it cannot drift.

Each example is the fenced block that follows a `<!-- doc-test: NAME -->`
marker in README.md or a page of docs/ (docs/clients/cpp.md,
docs/clients/python.md, docs/clients/lockctl.md today); a NAME may be used
once. The only change made to a block is that the address 127.0.0.1:7411 is
replaced by that of the lockd this test starts.

  cpp + cpp-cmake  the C++ client is installed with
                   `cmake --install <build> --component lockd_client` into a
                   temporary prefix; the C++ example is built against it by a
                   fresh CMake project whose CMakeLists.txt is the documented
                   snippet (find_package(lockd)), then run.
  python           run with /usr/bin/python3 and the assembled package.
  python-kinds     the same (shared locks, semaphores, lock_all).
  lockctl          run with bash -e, lockctl on PATH, in a directory with a
                   ./report.sh.
  lockctl-kinds    run with bash -e, lockctl on PATH.

Environment (set by tests/integration/clients/CMakeLists.txt):
LOCKD_SOURCE_DIR, LOCKD_BUILD_DIR, LOCKD_BINARY, LOCKCTL_DIR,
LOCKD_PYTHON_PKG, CMAKE_COMMAND, CMAKE_GENERATOR, CXX_COMPILER, CXX_LAUNCHER,
SANITIZER_FLAGS.
"""

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

DEFAULT_ADDRESS = "127.0.0.1:7411"


def documented_blocks():
    """{NAME: block} of every `<!-- doc-test: NAME -->` block in README.md and
    docs/**/*.md; a NAME marked twice raises."""
    source = os.environ["LOCKD_SOURCE_DIR"]
    files = [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "**", "*.md"), recursive=True))
    blocks = {}
    pattern = re.compile(r"<!-- doc-test: ([\w-]+) -->\s*\n```[\w]*\n(.*?)\n```", re.DOTALL)
    for path in files:
        with open(path) as f:
            text = f.read()
        for name, body in pattern.findall(text):
            if name in blocks:
                raise ValueError("<!-- doc-test: %s --> is marked twice (again in %s)"
                                 % (name, path))
            blocks[name] = body + "\n"
    return blocks


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, timeout=300, **kwargs):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, **kwargs)
    return proc.returncode, proc.stdout.decode(errors="replace")


class ReadmeExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.blocks = documented_blocks()
        cls.tmp = tempfile.mkdtemp(prefix="lockd-readme-test-")
        cls.address = "127.0.0.1:%d" % free_port()
        cls.log = open(os.path.join(cls.tmp, "lockd.log"), "wb")
        cls.lockd = subprocess.Popen([os.environ["LOCKD_BINARY"], "--listen=" + cls.address],
                                     stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            with open(os.path.join(cls.tmp, "lockd.log"), errors="replace") as f:
                if "lockd serving on" in f.read():
                    break
            if cls.lockd.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("lockd did not start")
            time.sleep(0.02)

    @classmethod
    def tearDownClass(cls):
        cls.lockd.kill()
        cls.lockd.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def block(self, name, talks_to_lockd=True):
        self.assertIn(name, self.blocks,
                      "no <!-- doc-test: %s --> block in README.md or docs/" % name)
        body = self.blocks[name]
        if talks_to_lockd:
            self.assertIn(DEFAULT_ADDRESS, body)
        return body.replace(DEFAULT_ADDRESS, self.address)

    def test_cpp_example_builds_against_the_installed_package_and_runs(self):
        prefix = os.path.join(self.tmp, "prefix")
        code, out = run([os.environ["CMAKE_COMMAND"], "--install", os.environ["LOCKD_BUILD_DIR"],
                         "--prefix", prefix, "--component", "lockd_client"])
        self.assertEqual(code, 0, out)
        for f in ("include/lockd/client.h", "include/lockd/v1/lock_mock.grpc.pb.h",
                  "lib/cmake/lockd/lockdConfig.cmake"):
            self.assertTrue(os.path.exists(os.path.join(prefix, f)), f)

        src = os.path.join(self.tmp, "consumer")
        os.makedirs(src)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(self.block("cpp-cmake", talks_to_lockd=False))
        with open(os.path.join(src, "main.cc"), "w") as f:
            f.write(self.block("cpp"))
        target = re.search(r"add_executable\((\w+)", self.blocks["cpp-cmake"]).group(1)
        build = os.path.join(src, "build")
        configure = [os.environ["CMAKE_COMMAND"], "-S", src, "-B", build,
                     "-G", os.environ["CMAKE_GENERATOR"], "-DCMAKE_PREFIX_PATH=" + prefix,
                     "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                     "-DCMAKE_CXX_COMPILER=" + os.environ["CXX_COMPILER"]]
        if os.environ.get("CXX_LAUNCHER"):
            configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=" + os.environ["CXX_LAUNCHER"])
        flags = os.environ.get("SANITIZER_FLAGS", "")
        if flags:
            configure += ["-DCMAKE_CXX_FLAGS=" + flags, "-DCMAKE_EXE_LINKER_FLAGS=" + flags]
        code, out = run(configure)
        self.assertEqual(code, 0, out)
        code, out = run([os.environ["CMAKE_COMMAND"], "--build", build])
        self.assertEqual(code, 0, out)

        code, out = run([os.path.join(build, target)], timeout=60)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"holding orders/42 with fencing token [1-9]\d*")

    def test_python_example_runs(self):
        env = dict(os.environ, PYTHONPATH=os.environ["LOCKD_PYTHON_PKG"],
                   PYTHONDONTWRITEBYTECODE="1")
        code, out = run(["/usr/bin/python3", "-c", self.block("python")], timeout=60, env=env)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"holding orders/42 with fencing token [1-9]\d*")

    def test_lockctl_example_runs(self):
        work = os.path.join(self.tmp, "lockctl")
        os.makedirs(work)
        report = os.path.join(work, "report.sh")
        with open(report, "w") as f:
            f.write("#!/bin/sh\necho \"report ran with fencing token $LOCKD_FENCING_TOKEN\"\n")
        os.chmod(report, 0o755)
        env = dict(os.environ, PATH=os.environ["LOCKCTL_DIR"] + os.pathsep + os.environ["PATH"])
        env.pop("LOCKD_SERVER", None)
        code, out = run(["bash", "-e", "-c", self.block("lockctl")], timeout=120, env=env,
                        cwd=work)
        self.assertEqual(code, 0, out)
        self.assertIn("report ran with fencing token", out)
        self.assertIn('"name":"orders/42"', out)
        self.assertIn('"ttlRemaining":"', out)  # proto3 JSON, not lockctl's own dialect
        self.assertIn("released: true", out)
        self.assertIn("SERVING", out)
        self.assertRegex(out, r"lockctl \d+\.\d+\.\d+ \(git \w+\)")

    def test_python_kinds_example_runs(self):
        env = dict(os.environ, PYTHONPATH=os.environ["LOCKD_PYTHON_PKG"],
                   PYTHONDONTWRITEBYTECODE="1")
        code, out = run(["/usr/bin/python3", "-c", self.block("python-kinds")], timeout=60,
                        env=env)
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"reading catalog with fencing token [1-9]\d*")
        self.assertIn("calling payments-api with 1 of 4 permits", out)
        self.assertRegex(out, r"moving money with fencing tokens \[[1-9]\d*, [1-9]\d*\]")

    def test_lockctl_kinds_example_runs(self):
        env = dict(os.environ, PATH=os.environ["LOCKCTL_DIR"] + os.pathsep + os.environ["PATH"])
        env.pop("LOCKD_SERVER", None)
        code, out = run(["bash", "-e", "-c", self.block("lockctl-kinds")], timeout=120, env=env,
                        cwd=self.tmp)
        self.assertEqual(code, 0, out)
        self.assertIn("mode: shared", out)
        self.assertIn("owner: reader-1", out)
        self.assertIn("owner: reader-2", out)
        self.assertIn("2 of 4 permits", out)
        self.assertRegex(out, r"tokens [1-9]\d*,[1-9]\d*")


if __name__ == "__main__":
    unittest.main()
