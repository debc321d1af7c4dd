"""Tests of the lockd Python client against several lockd replicas behind one
address list: how lists become gRPC targets, a list with a dead address, and
replicas over one real Redis (redis-server, started here) of which the one
holding a session is killed with SIGKILL: the session resumes its hold on
another replica and calls (session and unary) go on without an error.

Run with the client suite (ctest lockd_python_wheel_test, see
test_client.py); needs $LOCKD_BINARY and redis-server.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import lockd
from lockd._target import channel_target
from test_client import Lockd, free_port, wait_until


class ChannelTargetTest(unittest.TestCase):
    def test_single_addresses_and_grpc_uris_pass_unchanged(self):
        for target in ("127.0.0.1:7411", "lockd.example:7411", "dns:///lockd-headless:7411",
                       "ipv4:127.0.0.1:1,127.0.0.1:2", "unix:/run/lockd.sock"):
            self.assertEqual(channel_target(target), (target, None))

    def test_ip_list_becomes_one_ipv4_target(self):
        self.assertEqual(channel_target("127.0.0.1:7411, 127.0.0.2:7412,127.0.0.1:7411"),
                         ("ipv4:127.0.0.1:7411,127.0.0.2:7412", "127.0.0.1:7411"))

    def test_any_ipv6_address_makes_an_ipv6_target(self):
        self.assertEqual(channel_target("[::1]:7411,127.0.0.1:7412"),
                         ("ipv6:[::1]:7411,[::ffff:127.0.0.1]:7412", "[::1]:7411"))

    def test_malformed_entries_are_value_errors_naming_them(self):
        for bad, why in (("127.0.0.1:1,,127.0.0.1:2", "empty entry"),
                         ("127.0.0.1:1,127.0.0.1", "'127.0.0.1'"),
                         ("127.0.0.1:1,127.0.0.1:0", "port"),
                         ("127.0.0.1:1,::1:7411", "brackets"),
                         ("127.0.0.1:1,no-such-host.invalid:7411", "cannot resolve")):
            with self.assertRaises(ValueError) as cm:
                channel_target(bad)
            self.assertIn(why, str(cm.exception))


class Redis:
    """redis-server on a free port, no persistence."""

    def __init__(self, tmp: str):
        self.port = free_port()
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT)
        if not wait_until(self._answers, timeout=20):
            self.stop()
            raise RuntimeError("redis-server did not start")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class RedisLockd(Lockd):
    def __init__(self, tmp: str, port: int, redis_port: int):
        super().__init__(tmp, port)
        self.redis_port = redis_port

    def start(self):
        binary = os.environ["LOCKD_BINARY"]
        log = open(os.path.join(self.tmp, "lockd-%d.log" % self.port), "ab")
        self.proc = subprocess.Popen(
            [binary, "--listen=" + self.address, "--lease.min=100ms", "--backend=redis",
             "--redis.addresses=127.0.0.1:%d" % self.redis_port],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if not wait_until(lambda: "lockd serving on" in self.log(), timeout=30):
            raise RuntimeError("lockd did not start: " + self.log())


class ReplicasTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lockd-py-replicas-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()

    def client(self, target, **kwargs) -> lockd.Client:
        kwargs.setdefault("rpc_timeout", 5)
        c = lockd.Client(target, **kwargs)
        self.clients.append(c)
        return c

    def test_list_with_a_dead_address_reaches_the_live_one(self):
        live = Lockd(self.tmp, free_port())
        live.start()
        self.addCleanup(live.stop)
        target = "127.0.0.1:%d,%s" % (free_port(), live.address)  # nothing listens on the first
        for use_sessions in (True, False):
            c = self.client(target, use_sessions=use_sessions)
            for _ in range(5):
                # ttl 10: long enough for a session (ttl*2/3 - drift > K = 4 s)
                with c.lock("dead-first", ttl=10) as lease:
                    self.assertTrue(lease.valid())
                    self.assertTrue(c.describe("dead-first").held)
            self.assertFalse(c.describe("dead-first").held)

    def test_killed_replica_session_resumes_on_another_and_calls_go_on(self):
        redis = Redis(self.tmp)
        self.addCleanup(redis.stop)
        victim = RedisLockd(self.tmp, free_port(), redis.port)
        other = RedisLockd(self.tmp, free_port(), redis.port)
        self.addCleanup(victim.stop)
        self.addCleanup(other.stop)
        victim.start()
        target = "%s,%s" % (victim.address, other.address)
        # Only the victim is up: the session and its hold live there.
        holder = self.client(target, keepalive_time=1, keepalive_timeout=1)
        lost = []
        # Long enough for holder's channel, which found `other` down, to have
        # reconnected to it (gRPC's reconnect backoff is capped at 2 s) before
        # the validity after the break, ttl*2/3 - K - drift = 3.9 s with
        # K = keepalive_time + keepalive_timeout = 2 s, runs out.
        ttl = 9
        lease = holder.acquire("resumed", ttl=ttl, on_lost=lost.append)
        self.assertEqual((holder._session.ttl, lease.valid_until), (ttl, float("inf")))
        other.start()
        # K = 1.5 s: the session worker's leases of 3 s go over its session.
        workers = [self.client(target, keepalive_time=1, keepalive_timeout=0.5),
                   self.client(target, use_sessions=False)]
        errors, done, stop = [], [0, 0], threading.Event()

        def work(i):
            while not stop.is_set():
                try:
                    with workers[i].lock("busy", ttl=3, wait=10):
                        done[i] += 1
                    workers[i].describe("resumed")
                except Exception as e:  # noqa: BLE001 (any error fails the test)
                    errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(workers))]
        for t in threads:
            t.start()
        try:
            self.assertTrue(wait_until(lambda: min(done) >= 20))
            victim.stop()  # SIGKILL
            killed, at_kill = time.monotonic(), list(done)
            self.assertTrue(wait_until(lambda: all(d >= k + 20 for d, k in zip(done, at_kill))))
            time.sleep(max(0.0, killed + ttl + 0.5 - time.monotonic()))  # past the ttl
        finally:
            stop.set()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])
        self.assertEqual(workers[0]._session.ttl, 3)
        self.assertEqual(lost, [])
        self.assertTrue(lease.valid())
        info = self.client(other.address).describe("resumed")
        self.assertEqual((info.held, info.owner, info.fencing_token),
                         (True, holder.owner, lease.fencing_token))
        lease.release()
        self.assertFalse(workers[0].describe("resumed").held)


if __name__ == "__main__":
    unittest.main()
