"""lockbench smoke test: every scenario for about a second against a real
lockd on the memory backend, so that the benchmark cannot rot. Asserts what
must hold on any machine, however loaded: the JSON parses, work was done,
exclusion held (no lost updates), every parked waiter was served and lockd's
thread count did not grow with the waiters, Session holders kept their
locks for several leases without a `lost` and released them all, readers of
a read-write lock were seen holding together and never beside a writer, a
semaphore never had more permits held than its limit, and AcquireAll callers
listing pairs in opposite orders never deadlocked. No timing thresholds. The scenarios that can run both ways (unary calls and lockd's
Session stream: all but expiry, unary only, and holders, sessions only) do.

LockbenchDirectRedisSmokeTest does the same for the direct-Redis baseline
(--direct-redis: the redis backend's Lua scripts sent straight to Redis with
hiredis, no lockd) against a private redis-server on a free loopback port.

LockbenchServiceSmokeTest runs the `service` scenario (one lockd::Client
shared by threads, each API, uncontended and contended) against lockd on the
memory backend and against lockbench_null_server (the floor bench/service.sh
measures).

Run: python3 smoke_test.py --lockd PATH --lockbench PATH [TestClass ...]
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(test, cmd):
    """Runs lockbench `cmd` (with --json); asserts it exits 0 and returns its
    report."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    test.assertEqual(p.returncode, 0,
                     "%s exited %d\nstdout: %s\nstderr: %s" %
                     (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return json.loads(p.stdout)


class LockbenchSmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.log = tempfile.NamedTemporaryFile(prefix="lockd-lockbench-", suffix=".log",
                                              delete=False)
        # lease.min lowered so that `expiry` runs in about a second.
        cls.lockd = subprocess.Popen(
            [ARGS.lockd, "--listen=127.0.0.1:%d" % cls.port, "--backend=memory",
             "--lease.min=100ms"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if "lockd serving on" in cls.read_log():
                return
            if cls.lockd.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("lockd did not start:\n" + cls.read_log())

    @classmethod
    def read_log(cls):
        with open(cls.log.name) as f:
            return f.read()

    @classmethod
    def tearDownClass(cls):
        cls.lockd.send_signal(signal.SIGTERM)
        cls.lockd.wait(timeout=30)
        os.unlink(cls.log.name)

    def run_bench(self, *args):
        report = run_json(self, [ARGS.lockbench, *args, "--target=127.0.0.1:%d" % self.port,
                                 "--json"])
        self.assertEqual(report["backend"], "memory")
        self.assertIs(report["ok"], True)
        return report

    def test_contended_keeps_exclusion(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                self.check_contended(api)

    def check_contended(self, api):
        r = self.run_bench("contended", "--clients=4", "--duration=1s", "--budget=1000000",
                           "--api=" + api)
        self.assertEqual(r["scenario"], "contended")
        self.assertEqual(r["api"], api)
        self.assertGreater(r["critical_sections"], 0)
        self.assertGreater(r["cs_per_s"], 0)
        self.assertEqual(r["lost_updates"], 0)
        self.assertEqual(r["counter_final"], r["critical_sections"])
        self.assertEqual(r["acquire_samples"], r["critical_sections"])
        self.assertGreater(r["handoff_samples"], 0)
        self.assertGreater(r["handoff_p50_ms"], 0)
        self.assertLessEqual(r["acquire_p50_ms"], r["acquire_p99_ms"])
        self.assertLessEqual(r["acquire_p99_ms"], r["acquire_max_ms"])
        self.assertGreater(r["cs_per_client_min"], 0)
        self.assertGreater(r["fairness"], 0)
        self.assertLessEqual(r["fairness"], 1)

    def test_contended_budget_is_exact(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                r = self.run_bench("contended", "--clients=3", "--budget=200", "--duration=60s",
                                   "--api=" + api)
                self.assertEqual(r["critical_sections"], 200)
                self.assertEqual(r["lost_updates"], 0)

    def test_contended_with_blocking_clients(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                r = self.run_bench("contended", "--clients=3", "--budget=200", "--sync-client",
                                   "--api=" + api)
                self.assertIn("sync", r["client"])
                self.assertEqual(r["api"], api)
                self.assertEqual(r["critical_sections"], 200)
                self.assertEqual(r["lost_updates"], 0)

    def test_session_clients_use_the_stream(self):
        for sync in ([], ["--sync-client"]):
            with self.subTest(sync=sync):
                r = self.run_bench("uncontended", "--clients=2", "--duration=1s",
                                   "--api=session", *sync)
                self.assertIn("session", r["client"])
                self.assertGreater(r["pairs"], 0)
                self.assertEqual(r["not_acquired"], 0)

    def test_uncontended_pairs(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                self.check_uncontended(api)

    def check_uncontended(self, api):
        r = self.run_bench("uncontended", "--clients=4", "--duration=1s", "--names-per-client=3",
                           "--api=" + api)
        self.assertEqual(r["api"], api)
        self.assertGreater(r["pairs"], 0)
        self.assertGreater(r["pairs_per_s"], 0)
        self.assertEqual(r["not_acquired"], 0)
        self.assertEqual(r["acquire_samples"], r["pairs"])
        self.assertGreater(r["acquire_p50_ms"], 0)

    def test_waiters_are_parked_without_threads_and_drained(self):
        r = self.run_bench("waiters", "--clients=4", "--waiters=1000", "--locks=4",
                           "--lockd-pid=%d" % self.lockd.pid, "--timeout=60s")
        self.assertEqual(r["waiters_seen_by_lockd"], 1000)
        self.assertEqual(r["granted"], 1000)
        self.assertEqual(r["failed"], 0)
        self.assertGreater(r["rss_parked_kb"], 0)
        # Parking 1000 calls must not add a thread per waiter.
        self.assertLess(r["threads_parked"], r["threads_idle"] + 50)
        self.assertGreater(r["drain_s"], 0)

    def test_session_waiters_share_streams_and_drain(self):
        r = self.run_bench("waiters", "--clients=4", "--waiters=1000", "--locks=4",
                           "--lockd-pid=%d" % self.lockd.pid, "--timeout=60s", "--api=session",
                           "--waiters-per-session=100")
        self.assertEqual(r["api"], "session")
        self.assertEqual(r["sessions"], 10)
        self.assertEqual(r["waiters_seen_by_lockd"], 1000)
        self.assertEqual(r["granted"], 1000)
        self.assertEqual(r["failed"], 0)
        self.assertLess(r["threads_parked"], r["threads_idle"] + 50)

    def test_session_holders_keep_their_locks_and_release_them(self):
        # 5 leases of 300 ms: the server renews every hold about 15 times.
        r = self.run_bench("holders", "--sessions=200", "--channels=4", "--lease=300ms",
                           "--hold=1500ms", "--lockd-pid=%d" % self.lockd.pid, "--timeout=60s")
        self.assertEqual(r["scenario"], "holders")
        self.assertEqual(r["api"], "session")
        self.assertEqual(r["sessions"], 200)
        self.assertEqual(r["channels"], 4)
        self.assertEqual(r["acquired"], 200)
        self.assertEqual(r["acquire_samples"], 200)
        self.assertEqual(r["lost"], 0)
        self.assertGreaterEqual(r["held_ms"], 1500)
        self.assertEqual(r["held_sample"], 100)
        self.assertEqual(r["held_at_end_of_hold"], 100)
        self.assertEqual(r["ended_ok"], 200)
        self.assertEqual(r["ended_early"], 0)
        self.assertEqual(r["held_after_close"], 0)
        self.assertGreater(r["rss_full_mb"], 0)
        # 200 streams must not add a thread per stream.
        self.assertLess(r["threads_full"], r["threads_idle"] + 50)

    def test_holders_usage_errors(self):
        for args, says in ((["holders", "--api=unary"], "--api=session"),
                           (["holders", "--lease=1s", "--hold=2s"], "at least 3 leases")):
            with self.subTest(args=args):
                p = subprocess.run([ARGS.lockbench, *args, "--target=127.0.0.1:%d" % self.port],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)

    def test_expiry_grants_after_lease_end(self):
        r = self.run_bench("expiry", "--clients=2", "--chain=3", "--lease=200ms")
        self.assertEqual(r["grants_after_expiry"], 4)
        self.assertEqual(r["not_granted"], 0)
        self.assertIs(r["tokens_increase"], True)
        # The next holder is granted after, not before, the lease ends (50 ms
        # of slack for the two replies' different transit times).
        self.assertGreater(r["earliest_before_lease_end_ms"], -50)

    def test_session_where_it_cannot_run_is_usage_error(self):
        for args, says in ((["expiry", "--api=session"], "renews its holds"),
                           (["uncontended", "--api=session", "--direct-redis=127.0.0.1:1"],
                            "no sessions"),
                           (["uncontended", "--api=stream"], "--api")):
            with self.subTest(args=args):
                p = subprocess.run([ARGS.lockbench, *args, "--target=127.0.0.1:%d" % self.port],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)

    def test_rw_readers_overlap_and_writers_hold_alone(self):
        r = self.run_bench("rw", "--clients=6", "--duration=1s", "--hold=2ms")
        self.assertEqual(r["scenario"], "rw")
        self.assertEqual(r["read_mode"], "shared")
        self.assertGreater(r["reads"], 0)
        self.assertGreater(r["writes"], 0)
        self.assertEqual(r["reads"] + r["writes"], r["critical_sections"])
        self.assertGreater(r["max_concurrent_readers"], 1)
        self.assertIs(r["readers_overlap"], True)
        self.assertEqual(r["exclusion_violations"], 0)
        self.assertGreater(r["fairness"], 0)

    def test_rw_with_exclusive_reads_never_overlaps(self):
        r = self.run_bench("rw", "--clients=4", "--duration=1s", "--read-mode=exclusive")
        self.assertEqual(r["read_mode"], "exclusive")
        self.assertGreater(r["critical_sections"], 0)
        self.assertEqual(r["max_concurrent_readers"], 0)
        self.assertEqual(r["exclusion_violations"], 0)

    def test_semaphore_stays_within_its_limit(self):
        r = self.run_bench("semaphore", "--clients=6", "--duration=1s", "--limit=3",
                           "--hold=2ms")
        self.assertEqual(r["limit"], 3)
        self.assertGreater(r["critical_sections"], 0)
        self.assertGreater(r["max_permits_held"], 1)
        self.assertLessEqual(r["max_permits_held"], 3)
        self.assertEqual(r["exclusion_violations"], 0)

    def test_acquire_all_pairs_in_opposite_orders_complete(self):
        r = self.run_bench("acquire-all", "--clients=6", "--duration=1s", "--names=4")
        self.assertGreater(r["critical_sections"], 0)
        self.assertGreater(r["listed_descending"], 0)
        self.assertEqual(r["wait_timeouts"], 0)
        self.assertEqual(r["exclusion_violations"], 0)

    def test_kinds_usage_errors(self):
        for args, says in ((["rw", "--api=session"], "unary calls on event loops only"),
                           (["acquire-all", "--sync-client"], "unary calls on event loops only"),
                           (["rw", "--readers=1.5"], "--readers"),
                           (["rw", "--read-mode=upgrade"], "--read-mode"),
                           (["semaphore", "--limit=2", "--permits=3"], "--permits"),
                           (["acquire-all", "--names=1"], "--names")):
            with self.subTest(args=args):
                p = subprocess.run([ARGS.lockbench, *args, "--target=127.0.0.1:%d" % self.port],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)

    def test_bad_flag_is_usage_error(self):
        p = subprocess.run([ARGS.lockbench, "contended", "--no-such-flag=1"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--no-such-flag", p.stderr)


def start_redis(workdir, log):
    """Starts redis-server on a free loopback port in `workdir`, as
    tests/support/redis_server.cc does (no persistence); returns (process,
    port) once it answers PING. Raises if it is not installed or does not
    come up within 20 s."""
    binary = (shutil.which("redis-server") or
              next((b for b in ("/usr/bin/redis-server", "/usr/sbin/redis-server")
                    if os.access(b, os.X_OK)), None))
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir,
         "--daemonize", "no", "--save", "", "--appendonly", "no", "--loglevel", "notice"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.sendall(b"PING\r\n")
                if c.recv(64).startswith(b"+PONG"):
                    return proc, port
        except OSError:
            pass
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    with open(log.name) as f:
        raise RuntimeError("redis-server did not start on port %d:\n%s" % (port, f.read()))


class LockbenchDirectRedisSmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="lockd-lockbench-redis-")
        cls.log = open(os.path.join(cls.dir.name, "redis.log"), "w")
        cls.redis, cls.port = start_redis(cls.dir.name, cls.log)

    @classmethod
    def tearDownClass(cls):
        cls.redis.send_signal(signal.SIGTERM)
        cls.redis.wait(timeout=30)
        cls.log.close()
        cls.dir.cleanup()

    def run_direct(self, *args):
        cmd = [ARGS.lockbench, *args, "--direct-redis=127.0.0.1:%d" % self.port]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0,
                         "%s exited %d\nstdout: %s\nstderr: %s" %
                         (" ".join(cmd), p.returncode, p.stdout, p.stderr))
        self.assertEqual(p.stderr, "")
        return p.stdout

    def test_uncontended_pairs_complete_without_errors(self):
        r = json.loads(self.run_direct("uncontended", "--clients=4", "--duration=1s",
                                       "--names-per-client=3", "--json"))
        self.assertEqual(r["backend"], "redis-direct")
        self.assertEqual(r["target"], "127.0.0.1:%d" % self.port)
        self.assertIs(r["ok"], True)
        self.assertGreater(r["pairs"], 0)
        self.assertGreater(r["pairs_per_s"], 0)
        self.assertEqual(r["not_acquired"], 0)
        self.assertEqual(r["acquire_samples"], r["pairs"])
        self.assertGreater(r["acquire_p50_ms"], 0)
        self.assertLessEqual(r["acquire_p50_ms"], r["acquire_p99_ms"])

    def test_contended_keeps_exclusion(self):
        r = json.loads(self.run_direct("contended", "--clients=3", "--budget=200",
                                       "--duration=60s", "--json"))
        self.assertEqual(r["backend"], "redis-direct")
        self.assertIs(r["ok"], True)
        self.assertEqual(r["critical_sections"], 200)
        self.assertEqual(r["lost_updates"], 0)
        self.assertEqual(r["counter_final"], 200)

    def test_prints_its_figures_as_a_table(self):
        out = self.run_direct("uncontended", "--clients=2", "--duration=1s")
        rows = {}
        for line in out.splitlines():
            key, _, value = line.strip().partition(" ")
            rows[key] = value.strip()
        self.assertEqual(rows["backend"], "redis-direct")
        self.assertEqual(rows["ok"], "true")
        self.assertGreater(int(rows["pairs"]), 0)
        self.assertGreater(float(rows["pairs_per_s"]), 0)
        self.assertEqual(int(rows["not_acquired"]), 0)


def start_server(cmd, log):
    """Starts `cmd` (lockd or lockbench_null_server) logging to `log`; returns
    the process once it logs "serving on". Raises if it does not within 30 s."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while time.time() < deadline and proc.poll() is None:
        with open(log.name) as f:
            if "serving on" in f.read():
                return proc
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    with open(log.name) as f:
        raise RuntimeError("%s did not start:\n%s" % (cmd[0], f.read()))


class LockbenchServiceSmokeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="lockd-lockbench-service-")
        cls.lockd_log = open(os.path.join(cls.dir.name, "lockd.log"), "w")
        cls.null_log = open(os.path.join(cls.dir.name, "null.log"), "w")
        cls.lockd_port, cls.null_port = free_port(), free_port()
        cls.lockd = start_server([ARGS.lockd, "--listen=127.0.0.1:%d" % cls.lockd_port,
                                  "--backend=memory"], cls.lockd_log)
        cls.null = start_server([ARGS.null_server, "127.0.0.1:%d" % cls.null_port],
                                cls.null_log)

    @classmethod
    def tearDownClass(cls):
        for proc in (cls.lockd, cls.null):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        cls.lockd_log.close()
        cls.null_log.close()
        cls.dir.cleanup()

    def run_service(self, port, *args):
        r = run_json(self, [ARGS.lockbench, "service", "--target=127.0.0.1:%d" % port,
                            "--duration=1s", "--json", *args])
        self.assertEqual(r["scenario"], "service")
        self.assertIs(r["ok"], True)
        self.assertEqual(r["errors"], 0)
        self.assertEqual([k for k in r if k.startswith("errors_")], [])
        self.assertLessEqual(r["acquire_p50_ms"], r["acquire_p99_ms"])
        self.assertGreater(r["fairness"], 0)
        self.assertLessEqual(r["fairness"], 1)
        return r

    def test_threads_share_one_client_for_pairs(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                r = self.run_service(self.lockd_port, "--threads=8", "--api=" + api)
                self.assertEqual(r["backend"], "memory")
                self.assertEqual(r["api"], api)
                self.assertEqual(r["threads"], 8)
                self.assertEqual(r["clients"], 8)
                self.assertIs(r["contended"], False)
                self.assertGreater(r["pairs"], 0)
                self.assertGreater(r["pairs_per_s"], 0)
                self.assertEqual(r["acquire_samples"], r["pairs"])
                self.assertEqual(r["release_samples"], r["pairs"])
                self.assertGreater(r["per_thread_min"], 0)

    def test_contended_threads_exclude_each_other(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                r = self.run_service(self.lockd_port, "--threads=6", "--contended",
                                     "--locks=2", "--hold=1ms", "--api=" + api)
                self.assertIs(r["contended"], True)
                self.assertEqual(r["locks"], 2)
                self.assertEqual(r["hold_ms"], 1)
                self.assertGreater(r["critical_sections"], 0)
                self.assertGreater(r["cs_per_s"], 0)
                self.assertEqual(r["acquire_samples"], r["critical_sections"])
                self.assertEqual(r["lost_updates"], 0)
                self.assertEqual(r["token_regressions"], 0)

    def test_floor_runs_against_the_null_server(self):
        for api in ("unary", "session"):
            with self.subTest(api=api):
                r = self.run_service(self.null_port, "--threads=8", "--api=" + api)
                self.assertEqual(r["backend"], "grpc-floor")
                self.assertGreater(r["pairs"], 0)

    def test_usage_errors(self):
        for args, says in ((["--clients=4"], "--threads"),
                           (["--direct-redis=127.0.0.1:1"], "--threads"),
                           (["--sync-client"], "--sync-client"),
                           (["--api=session", "--lease=2s"], "--lease"),
                           (["--threads=0"], "--threads")):
            with self.subTest(args=args):
                p = subprocess.run([ARGS.lockbench, "service", *args,
                                    "--target=127.0.0.1:%d" % self.lockd_port],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)
        p = subprocess.run([ARGS.lockbench, "uncontended", "--contended"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--contended", p.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lockd", required=True)
    parser.add_argument("--lockbench", required=True)
    parser.add_argument("--null-server", help="lockbench_null_server (LockbenchServiceSmokeTest)")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
