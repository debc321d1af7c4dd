"""Issue 26's cross-language test: C++, Python, Java and Go clients contend
for one lock on one lockd (memory backend), each worker looping acquire ->
read-modify-write of a fenced counter file -> release, and the counter
loses nothing.

The counter file holds "count token": each worker, holding the lock, checks
that its fencing token is larger than the token of the last write (else it
exits 3: two holders at once, or a stale one), then writes count + 1 with
its token (to a temporary file renamed over it). Two workers per language
(cross_language/worker.cc, worker.py, Worker.java, go/main.go) run at once,
each ITERATIONS times; at the end the count must be their total.

Each language is prepared as the suite does it (clients/<language>/
prepare.sh BUILD_DIR, idempotent): the Python venv with the lockd package,
the Java client's jar (its classpath from Maven, offline first); the Go
worker is built against clients/go (a replace directive). The C++ worker is
a CMake target (CROSS_LANGUAGE_CPP_WORKER).

Environment (tests/integration/clients/CMakeLists.txt): LOCKD_BINARY,
LOCKD_SOURCE_DIR, LOCKD_BUILD_DIR, CROSS_LANGUAGE_CPP_WORKER.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ITERATIONS = 10
PER_LANGUAGE = 2
HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "cross_language")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kwargs):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       **kwargs)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout))
    return r.stdout


class CrossLanguageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.source = os.environ["LOCKD_SOURCE_DIR"]
        cls.build = os.environ["LOCKD_BUILD_DIR"]
        out = os.path.join(cls.build, "clients", "cross_language")
        os.makedirs(out, exist_ok=True)
        clients = os.path.join(cls.source, "clients")
        run([os.path.join(clients, "python", "prepare.sh"), cls.build])
        run([os.path.join(clients, "java", "prepare.sh"), cls.build])
        cls.python = os.path.join(cls.build, "clients", "python", "venv", "bin", "python")
        cls.java_classpath = cls.java_classpath_of(out)
        cls.go_worker = os.path.join(out, "go-worker")
        run(["go", "build", "-o", cls.go_worker, "."], cwd=os.path.join(WORKERS, "go"))
        cls.cpp_worker = os.environ["CROSS_LANGUAGE_CPP_WORKER"]

    @classmethod
    def java_classpath_of(cls, out):
        """lockd-client's jar and its dependencies (Maven's dependency
        plugin, offline when ~/.m2 has it)."""
        listing = os.path.join(out, "java-classpath.txt")
        pom = os.path.join(cls.source, "clients", "java", "lockd-client", "pom.xml")
        args = ["mvn", "-q", "-f", pom, "dependency:build-classpath",
                "-Dmdep.outputFile=" + listing]
        try:
            run(args[:1] + ["-o"] + args[1:])
        except RuntimeError:
            run(args)
        with open(listing) as f:
            deps = f.read().strip()
        jars = os.path.join(cls.build, "clients", "java", "lockd-client")
        jar = [os.path.join(jars, j) for j in sorted(os.listdir(jars))
               if j.startswith("lockd-client-") and j.endswith(".jar")
               and "sources" not in j and "javadoc" not in j and "tests" not in j]
        if not jar:
            raise RuntimeError("no lockd-client jar in " + jars)
        return jar[0] + os.pathsep + deps

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lockd-cross-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.address = "127.0.0.1:%d" % free_port()
        log_path = os.path.join(self.tmp, "lockd.log")
        with open(log_path, "wb") as log:
            self.lockd = subprocess.Popen([os.environ["LOCKD_BINARY"], "--listen=" + self.address],
                                          stdout=log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop_lockd)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self.assertIsNone(self.lockd.poll(), "lockd exited")
            with open(log_path, errors="replace") as f:
                if "lockd serving on" in f.read():
                    return
            time.sleep(0.05)
        self.fail("lockd did not start")

    def stop_lockd(self):
        self.lockd.kill()
        self.lockd.wait()

    def worker_commands(self, counter):
        args = [self.address, "cross/counter", counter, str(ITERATIONS)]
        return {
            "c++": [self.cpp_worker] + args,
            "python": [self.python, os.path.join(WORKERS, "worker.py")] + args,
            "java": ["java", "-cp", self.java_classpath, os.path.join(WORKERS, "Worker.java")]
                    + args,
            "go": [self.go_worker] + args,
        }

    def test_fenced_counter_loses_nothing(self):
        counter = os.path.join(self.tmp, "counter")
        with open(counter, "w") as f:
            f.write("0 0\n")
        procs = []
        for language, cmd in self.worker_commands(counter).items():
            for i in range(PER_LANGUAGE):
                log = open(os.path.join(self.tmp, "%s-%d.log" % (language, i)), "w+")
                self.addCleanup(log.close)
                procs.append((language, log, subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT,
                    env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))))
        for language, log, p in procs:
            try:
                rc = p.wait(timeout=300)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = p.wait()
            log.seek(0)
            self.assertEqual(rc, 0, "%s worker exited %d (3: fencing violation):\n%s"
                             % (language, rc, log.read()))
        with open(counter) as f:
            count, token = (int(x) for x in f.read().split())
        self.assertEqual(count, ITERATIONS * PER_LANGUAGE * 4)
        self.assertGreaterEqual(token, count)  # a new first grant per write


if __name__ == "__main__":
    unittest.main()
