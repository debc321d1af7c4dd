"""Tests of the lockd Python client.

FakeServerTest runs an in-process gRPC LockService whose answers each test
scripts (retries, request ids, undo of acquires whose outcome is unknown,
renewal cadence, send-time validity).
LockdTest runs the real lockd binary ($LOCKD_BINARY) on a free port, reached
directly or through StallProxy (replies held back, connections cut), with
clients using sessions (the default); LockdUnaryTest runs the same tests with
use_sessions=False. test_session.py has the tests of session-only behaviour.

Run by ctest (label `clients`, lockd_python_wheel_test) against the package
as users install it: clients/python/prepare.sh builds the wheel and installs
it into a venv with grpcio and protobuf from the package index, and pytest
runs this file with the venv's python.
"""

import concurrent.futures
import gc
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import lockd
from lockd._proto.google.rpc import error_details_pb2, status_pb2
from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seconds(d) -> float:
    return d.seconds + d.nanos / 1e9


# ----------------------------------------------------------------------------- fake server

class FakeService(lock_pb2_grpc.LockServiceServicer):
    """Grants everything unless told otherwise; records every request."""

    def __init__(self):
        self.mu = threading.Lock()
        self.acquires = []
        self.releases = []
        self.log = []  # "acquire <request_id>", "undo <acquire_request_id>", "release <request_id>"
        self.acquire_error = None  # (code, details): answer every Acquire with it
        self.grant = True  # False: answer acquired=false
        self.renews = []  # (monotonic time, request)
        self.fail_acquires = 0  # answer UNAVAILABLE to this many Acquires first
        self.fail_releases = 0
        self.acquire_delay = 0.0
        self.renew_error = None  # (code, details, trailing metadata) or None
        self.token = 7

    def Acquire(self, request, context):
        with self.mu:
            self.acquires.append(request)
            self.log.append("acquire " + request.request_id)
            fail = self.fail_acquires > 0
            if fail:
                self.fail_acquires -= 1
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "backend down")
        if self.acquire_error is not None:
            context.abort(*self.acquire_error)
        time.sleep(self.acquire_delay)
        if not self.grant:
            return lock_pb2.AcquireResponse(acquired=False, owner=request.owner)
        ttl = request.lease_ttl if request.HasField("lease_ttl") else None
        resp = lock_pb2.AcquireResponse(acquired=True, owner=request.owner,
                                        fencing_token=self.token, hold_count=1)
        if ttl is not None:
            resp.lease_ttl.CopyFrom(ttl)
        else:
            resp.lease_ttl.seconds = 30
        return resp

    def Release(self, request, context):
        with self.mu:
            self.releases.append(request)
            if request.acquire_request_id:
                self.log.append("undo " + request.acquire_request_id)
            else:
                self.log.append("release " + request.request_id)
            fail = self.fail_releases > 0
            if fail:
                self.fail_releases -= 1
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "backend down")
        return lock_pb2.ReleaseResponse(released=True, hold_count=0)

    def Renew(self, request, context):
        with self.mu:
            self.renews.append((time.monotonic(), request))
            error = self.renew_error
        if error is not None:
            code, details, trailing = error
            context.set_trailing_metadata(trailing)
            context.abort(code, details)
        resp = lock_pb2.RenewResponse(fencing_token=self.token)
        resp.lease_ttl.CopyFrom(request.lease_ttl)
        return resp


def lock_not_held_error():
    info = error_details_pb2.ErrorInfo(reason="LOCK_NOT_HELD", domain="lockd")
    st = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                           message="lock not held")
    st.details.add().Pack(info)
    return (grpc.StatusCode.FAILED_PRECONDITION, "lock not held",
            (("grpc-status-details-bin", st.SerializeToString()),))


class FakeServerTest(unittest.TestCase):
    def setUp(self):
        self.service = FakeService()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        lock_pb2_grpc.add_LockServiceServicer_to_server(self.service, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addCleanup(self.server.stop, None)  # after the clients close (cleanups run LIFO)
        self.client = self.make_client()

    def make_client(self, **overrides) -> lockd.Client:
        # The fake serves the unary RPCs only: these tests are about them.
        options = dict(owner="test-owner", initial_backoff=0.005, max_backoff=0.02,
                       rpc_timeout=2, release_timeout=1, use_sessions=False)
        options.update(overrides)
        client = lockd.Client("127.0.0.1:%d" % self.port, **options)
        self.addCleanup(client.close)
        # Connect before timing anything: a loaded machine can take longer
        # than the short test TTLs to set up the first connection.
        grpc.channel_ready_future(client._channel).result(timeout=10)
        return client

    def test_acquire_retried_after_a_confirmed_undo_uses_a_new_request_id(self):
        self.service.fail_acquires = 2
        lease = self.client.acquire("orders/42", ttl=10, namespace="billing")
        ids = [r.request_id for r in self.service.acquires]
        self.assertEqual(len(ids), 3)
        self.assertEqual(len(set(ids)), 3)
        # Each attempt that ended UNAVAILABLE is undone before the next one.
        self.assertEqual(self.service.log, ["acquire " + ids[0], "undo " + ids[0],
                                            "acquire " + ids[1], "undo " + ids[1],
                                            "acquire " + ids[2]])
        for undo in self.service.releases:
            self.assertEqual((undo.namespace, undo.name, undo.owner),
                             ("billing", "orders/42", "test-owner"))
            self.assertEqual(undo.request_id, "")
        self.assertEqual(lease.fencing_token, 7)
        lease.detach()

    def test_acquire_retried_after_an_unconfirmed_undo_keeps_its_request_id(self):
        self.service.fail_acquires = 2
        self.service.fail_releases = 10 ** 6
        # Each unanswered undo takes its whole bound, min(rpc, release_timeout).
        client = self.make_client(release_timeout=0.1, rpc_timeout=5)
        lease = client.acquire("orders/42", ttl=10)
        ids = [r.request_id for r in self.service.acquires]
        self.assertEqual(len(ids), 3)
        self.assertTrue(ids[0])
        self.assertEqual(set(ids), {ids[0]})  # the server answers a repeat with the first result
        self.assertGreaterEqual(len(self.service.releases), 2)
        lease.detach()

    def test_acquire_without_a_reply_is_undone_before_the_error_is_raised(self):
        self.service.acquire_delay = 0.6  # granted, but the reply comes too late
        with self.assertRaises(lockd.Unavailable) as cm:
            self.client.acquire("x", ttl=10, timeout=0.2)
        self.assertIsNone(cm.exception.unconfirmed_acquire_request_id)
        self.assertEqual(len(self.service.releases), 1)
        undo = self.service.releases[0]
        self.assertEqual(undo.acquire_request_id, self.service.acquires[0].request_id)
        self.assertEqual(undo.owner, "test-owner")
        self.assertEqual(undo.request_id, "")

    def test_acquire_timing_out_inside_the_wait_is_undone_too(self):
        self.service.acquire_delay = 0.6
        with self.assertRaises(lockd.LockNotAcquired):
            self.client.acquire("x", ttl=10, wait=5, timeout=0.2)
        self.assertEqual([r.acquire_request_id for r in self.service.releases],
                         [self.service.acquires[0].request_id])

    def test_unanswered_undo_is_reported_with_the_request_id_within_its_bound(self):
        self.service.acquire_delay = 1.5
        self.service.fail_releases = 10 ** 6
        client = self.make_client(release_timeout=1)
        start = time.monotonic()
        with self.assertRaises(lockd.Unavailable) as cm:
            client.try_acquire("x", ttl=10, timeout=0.2)
        elapsed = time.monotonic() - start
        request_id = self.service.acquires[0].request_id
        self.assertEqual(cm.exception.unconfirmed_acquire_request_id, request_id)
        self.assertIn(request_id, str(cm.exception))
        self.assertIn("test-owner", str(cm.exception))
        self.assertGreaterEqual(len(self.service.releases), 2)  # retried within its bound
        self.assertGreaterEqual(elapsed, 1.1)  # 0.2 s timeout + min(rpc, release_timeout)
        self.assertLess(elapsed, 3)

    def test_answers_from_the_server_are_not_undone(self):
        self.service.acquire_error = (grpc.StatusCode.INVALID_ARGUMENT, "lease_ttl: too long")
        with self.assertRaises(lockd.LockdError) as cm:
            self.client.try_acquire("x", ttl=10)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.service.acquire_error = (grpc.StatusCode.RESOURCE_EXHAUSTED, "too many waiters")
        with self.assertRaises(lockd.LockdError) as cm:
            self.client.try_acquire("x", ttl=10)
        self.assertEqual(cm.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.service.acquire_error = None
        self.service.grant = False
        with self.assertRaises(lockd.LockNotAcquired):
            self.client.try_acquire("x", ttl=10)
        self.assertEqual(self.service.releases, [])

    def test_interrupted_acquire_is_undone_before_the_interrupt_propagates(self):
        real = self.client._core.stub.Acquire

        def interrupted(request, timeout=None):
            real(request, timeout=timeout)  # sent and granted ...
            raise KeyboardInterrupt()  # ... but ^C came before the reply was used

        self.client._core.stub.Acquire = interrupted
        with self.assertRaises(KeyboardInterrupt):
            self.client.acquire("x", ttl=10)
        self.assertEqual([r.acquire_request_id for r in self.service.releases],
                         [self.service.acquires[0].request_id])

    def test_undo_acquire_sends_the_acquire_request_id_and_no_request_id(self):
        self.assertEqual(self.client.undo_acquire("x", "o", "abc", namespace="jobs"), (True, 0))
        undo = self.service.releases[0]
        self.assertEqual((undo.namespace, undo.name, undo.owner, undo.acquire_request_id,
                          undo.request_id, undo.fencing_token), ("jobs", "x", "o", "abc", "", 0))
        self.client.undo_acquire("x", "o", "abc", fencing_token=12)
        self.assertEqual(self.service.releases[1].fencing_token, 12)
        with self.assertRaises(lockd.LockdError):
            self.client.undo_acquire("x", "o", "")

    def test_releases_and_renewals_of_a_lease_carry_its_fencing_token(self):
        # A late release or renewal must not touch a later hold of the owner;
        # a reentrant lease has the first hold's token.
        self.service.token = 41
        first = self.client.acquire("x", ttl=0.6)  # renewed by the watchdog every 0.2 s
        again = self.client.acquire("x", ttl=10)
        again.renew()
        self.assertTrue(wait_until(lambda: len(self.service.renews) >= 2))
        again.release()
        first.release()
        self.assertEqual({r.fencing_token for _, r in self.service.renews}, {41})
        self.assertEqual([r.fencing_token for r in self.service.releases], [41, 41])

    def test_release_and_renew_by_owner_send_the_fencing_token_given(self):
        self.client.release("x", "o")
        self.client.release("x", "o", fencing_token=12)
        self.assertEqual([r.fencing_token for r in self.service.releases], [0, 12])
        self.client.renew("x", "o", ttl=5)
        self.client.renew("x", "o", ttl=5, fencing_token=13)
        self.assertEqual([r.fencing_token for _, r in self.service.renews], [0, 13])

    def test_each_acquire_has_its_own_request_id(self):
        a = self.client.acquire("x", ttl=10)
        b = self.client.acquire("x", ttl=10)
        self.assertNotEqual(self.service.acquires[0].request_id,
                            self.service.acquires[1].request_id)
        a.release()
        b.release()

    def test_release_retries_unavailable_with_the_same_request_id(self):
        lease = self.client.acquire("x", ttl=10)
        self.service.fail_releases = 2
        lease.release()
        ids = [r.request_id for r in self.service.releases]
        self.assertEqual(len(ids), 3)
        self.assertTrue(ids[0])
        self.assertEqual(set(ids), {ids[0]})

    def test_acquire_gives_up_with_unavailable_at_the_deadline(self):
        self.service.fail_acquires = 10 ** 6
        start = time.monotonic()
        with self.assertRaises(lockd.Unavailable):
            self.client.acquire("x", ttl=10, timeout=0.3)
        self.assertLess(time.monotonic() - start, 1.5)
        self.assertGreaterEqual(len(self.service.acquires), 2)

    def test_validity_is_measured_from_the_send_time(self):
        self.service.acquire_delay = 0.4
        before = time.monotonic()
        lease = self.client.acquire("x", ttl=3, auto_renew=False)
        after = time.monotonic()
        drift = 3 * 0.01 + 0.002
        self.assertLessEqual(lease.valid_until, before + 3 - drift + 0.05)
        self.assertLess(lease.valid_until, after + 3 - drift - 0.3)
        lease.release()

    def test_watchdog_renews_every_third_of_the_ttl_from_one_thread(self):
        start = time.monotonic()
        a = self.client.acquire("a", ttl=0.9)
        b = self.client.acquire("b", ttl=0.9)
        time.sleep(1.5)
        self.assertTrue(a.valid() and b.valid())
        times = [t for t, r in self.service.renews if r.name == "a"]
        self.assertGreaterEqual(len(times), 2)  # loose: a loaded machine delays the thread
        self.assertLessEqual(len(times), 6)
        # Each renewal is sent 0.3 s after the previous one was sent; the fake
        # server sees them arrive later by a varying delay on a loaded machine,
        # so a gap it measures can be a little shorter, never near 0.1 s.
        self.assertGreaterEqual(times[0] - start, 0.25)
        for x, y in zip(times, times[1:]):
            self.assertGreaterEqual(y - x, 0.2)
        for _, r in self.service.renews:
            self.assertAlmostEqual(seconds(r.lease_ttl), 0.9)
            self.assertEqual(r.owner, "test-owner")
        watchdogs = [t for t in threading.enumerate() if t.name == "lockd-watchdog"]
        self.assertEqual(len(watchdogs), 1)
        a.release()
        b.release()

    def test_lock_not_held_on_renew_loses_the_lease_once(self):
        self.service.renew_error = lock_not_held_error()
        fired = []
        done = threading.Event()

        def on_lost(err):
            fired.append(err)
            done.set()

        lease = self.client.acquire("x", ttl=1.2, on_lost=on_lost)
        self.assertTrue(done.wait(5))
        self.assertTrue(lease.lost.is_set())
        self.assertIsInstance(fired[0], lockd.LockLost)
        self.assertEqual(fired[0].reason, "LOCK_NOT_HELD")
        with self.assertRaises(lockd.LockLost):
            lease.release()
        time.sleep(0.3)
        self.assertEqual(len(fired), 1)
        self.assertEqual(self.service.releases, [])  # a lost lease sends no release

    def test_lease_is_lost_when_validity_runs_out_while_renewals_fail(self):
        self.service.renew_error = (grpc.StatusCode.UNAVAILABLE, "down", ())
        start = time.monotonic()
        lease = self.client.acquire("x", ttl=0.6)
        self.assertTrue(lease.lost.wait(3))
        self.assertGreaterEqual(time.monotonic() - start, 0.55)
        self.assertEqual(lease.lost_error.reason, "VALIDITY_EXPIRED")
        self.assertGreaterEqual(len(self.service.renews), 2)

    def test_leaving_the_block_after_a_loss_raises_lock_lost(self):
        self.service.renew_error = lock_not_held_error()
        with self.assertRaises(lockd.LockLost):
            with self.client.lock("x", ttl=0.3) as lease:
                self.assertTrue(lease.lost.wait(3))

    def test_grant_after_a_long_wait_is_renewed_before_acquire_returns(self):
        self.service.acquire_delay = 1.3
        lease = self.client.acquire("x", ttl=1.2, wait=5)
        self.assertGreaterEqual(len(self.service.renews), 1)
        self.assertTrue(lease.valid())
        self.assertGreater(lease.remaining(), 0.9)
        lease.release()

    def test_lockd_without_sessions_is_used_through_the_unary_rpcs(self):
        client = self.make_client(use_sessions=True)
        lease = client.acquire("x", ttl=10)  # the Session call is UNIMPLEMENTED here
        self.assertEqual(len(self.service.acquires), 1)
        self.assertFalse(client._use_sessions)
        lease.release()
        self.assertEqual(len(self.service.releases), 1)

    def test_collected_lease_is_released_in_the_background(self):
        lease = self.client.acquire("x", ttl=10)
        del lease
        gc.collect()
        deadline = time.monotonic() + 3
        while not self.service.releases and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(len(self.service.releases), 1)


# ----------------------------------------------------------------------------- real lockd

class Lockd:
    """The lockd binary on a fixed port (so that it can be restarted on it)."""

    def __init__(self, tmp: str, port: int, *flags: str):
        self.tmp, self.port, self.proc, self.flags = tmp, port, None, list(flags)
        self.address = "127.0.0.1:%d" % port

    def start(self):
        binary = os.environ["LOCKD_BINARY"]
        log = open(os.path.join(self.tmp, "lockd-%d.log" % self.port), "ab")
        self.proc = subprocess.Popen(
            [binary, "--listen=" + self.address, "--lease.min=100ms"] + self.flags,
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("lockd exited: " + self.log())
            if "lockd serving on" in self.log():
                return
            time.sleep(0.02)
        raise RuntimeError("lockd did not start: " + self.log())

    def log(self) -> str:
        with open(os.path.join(self.tmp, "lockd-%d.log" % self.port), errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class StallProxy:
    """A TCP proxy on a free loopback port in front of lockd. hold_replies(True)
    keeps lockd's bytes (forwarded in order once released): an Acquire is
    granted and its reply written, so lockd counts it as delivered, yet the
    client hears nothing. cut() closes every connection, dropping what was
    held back. One daemon thread moves the bytes."""

    def __init__(self, upstream_port: int):
        self._upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.address = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._mu = threading.Lock()
        self._hold_replies = False
        self._stop = False
        self._cut = threading.Event()
        self._cut_done = threading.Event()
        self._conns = []  # [client socket, upstream socket, to_upstream, to_client]
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def hold_replies(self, hold: bool) -> None:
        with self._mu:
            self._hold_replies = hold
        self._wake_w.send(b"x")

    def cut(self) -> None:
        self._cut_done.clear()
        self._cut.set()
        self._wake_w.send(b"x")
        self._cut_done.wait(10)

    def close(self) -> None:
        with self._mu:
            self._stop = True
        self._wake_w.send(b"x")
        self._thread.join(10)
        for s in (self._listener, self._wake_r, self._wake_w):
            s.close()

    @staticmethod
    def _close(conn) -> None:
        conn[0].close()
        conn[1].close()

    def _loop(self) -> None:
        while True:
            with self._mu:
                stop, hold = self._stop, self._hold_replies
            if stop or self._cut.is_set():
                for conn in self._conns:
                    self._close(conn)
                self._conns = []
                if stop:
                    return
                self._cut.clear()
                self._cut_done.set()
            alive = []
            for conn in self._conns:
                try:
                    for sock, buf, held in ((conn[1], conn[2], False), (conn[0], conn[3], hold)):
                        if buf and not held:
                            del buf[:sock.send(buf)]
                    alive.append(conn)
                except BlockingIOError:
                    alive.append(conn)
                except OSError:
                    self._close(conn)
            self._conns = alive
            readers = [self._wake_r, self._listener]
            writers = []
            for conn in self._conns:
                readers += [conn[0], conn[1]]
                if conn[2]:
                    writers.append(conn[1])
                if conn[3] and not hold:
                    writers.append(conn[0])
            readable, _, _ = select.select(readers, writers, [], 1.0)
            if self._wake_r in readable:
                try:
                    self._wake_r.recv(4096)
                except BlockingIOError:
                    pass
            if self._listener in readable:
                try:
                    client, _ = self._listener.accept()
                    upstream = socket.create_connection(self._upstream)
                    client.setblocking(False)
                    upstream.setblocking(False)
                    self._conns.append([client, upstream, bytearray(), bytearray()])
                except OSError:
                    pass
            for conn in list(self._conns):
                # Always read (keeping what is held back): to the sender a
                # held direction looks like a slow network.
                for sock, buf in ((conn[0], conn[2]), (conn[1], conn[3])):
                    if sock not in readable:
                        continue
                    try:
                        data = sock.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if not data:
                        self._close(conn)
                        self._conns.remove(conn)
                        break
                    buf += data


def wait_until(cond, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.005)
    return False


class LockdTestBase(unittest.TestCase):
    """A fresh lockd (memory backend) per test; clients made by client()
    use sessions unless USE_SESSIONS is False, and notice a hung lockd
    within K = keepalive_time + keepalive_timeout = 2 s (unless told
    otherwise), so that leases with ttl*2/3 - drift > 2, ttl >= 3.1 s, go
    over their session (shorter ones go unary)."""

    USE_SESSIONS = True

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="lockd-py-test-")
        self.lockd = Lockd(self.tmp, free_port())
        self.lockd.start()
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        self.lockd.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def client(self, target=None, **kwargs) -> lockd.Client:
        kwargs.setdefault("rpc_timeout", 3)
        kwargs.setdefault("use_sessions", self.USE_SESSIONS)
        kwargs.setdefault("keepalive_time", 1)
        kwargs.setdefault("keepalive_timeout", 1)
        c = lockd.Client(target or self.lockd.address, **kwargs)
        self.clients.append(c)
        return c

    def proxy(self) -> StallProxy:
        p = StallProxy(self.lockd.port)
        self.addCleanup(p.close)
        return p

    def held_by(self, observer: lockd.Client, name: str, owner: str) -> bool:
        info = observer.describe(name)
        return info.held and info.owner == owner

    def regrant(self, name: str, owner: str, ttl: int) -> int:
        """Behind the back of the client holding ``name``: releases owner's
        hold (without a fencing token, so whatever hold owner has) and
        acquires it again for owner with lease ``ttl``, through a raw stub.
        Returns the new hold's fencing token."""
        with grpc.insecure_channel(self.lockd.address) as channel:
            stub = lock_pb2_grpc.LockServiceStub(channel)
            rel = stub.Release(lock_pb2.ReleaseRequest(
                name=name, owner=owner, request_id="regrant-%d" % time.monotonic_ns()), timeout=5)
            self.assertTrue(rel.released)
            req = lock_pb2.AcquireRequest(name=name, owner=owner,
                                          request_id="regrant-%d" % time.monotonic_ns())
            req.lease_ttl.seconds = ttl
            resp = stub.Acquire(req, timeout=5)
            self.assertTrue(resp.acquired)
            return resp.fencing_token


class LockdTest(LockdTestBase):
    """The client's behaviour against lockd, over sessions (the default);
    LockdUnaryTest runs it again over the unary RPCs."""

    def test_with_block_holds_the_lock_and_releases_it(self):
        a, b = self.client(), self.client()
        with a.lock("orders/42", ttl=10, wait=5) as lease:
            info = b.describe("orders/42")
            self.assertTrue(info.held)
            self.assertEqual(info.owner, a.owner)
            self.assertEqual(info.fencing_token, lease.fencing_token)
            self.assertFalse(lease.lost.is_set())
            self.assertTrue(lease.valid())
        self.assertFalse(b.describe("orders/42").held)

    def test_other_owner_is_not_acquired_and_learns_the_holder(self):
        a, b = self.client(), self.client()
        with a.lock("x", ttl=10):
            with self.assertRaises(lockd.LockNotAcquired) as cm:
                b.try_acquire("x", ttl=10)
            self.assertEqual(cm.exception.holder.owner, a.owner)
            with self.assertRaises(lockd.LockNotAcquired):
                b.acquire("x", ttl=10, wait=0.3)

    def test_waiter_gets_the_lock_after_release_with_a_greater_token(self):
        a, b = self.client(), self.client()
        first = a.acquire("x", ttl=10)
        got = []

        def waiter():
            with b.lock("x", ttl=10, wait=10) as lease:
                got.append(lease.fencing_token)

        t = threading.Thread(target=waiter)
        t.start()
        time.sleep(0.3)
        self.assertEqual(got, [])
        first.release()
        t.join(10)
        self.assertEqual(len(got), 1)
        self.assertGreater(got[0], first.fencing_token)

    def test_same_owner_is_reentrant(self):
        a = self.client()
        one = a.acquire("x", ttl=10)
        two = a.acquire("x", ttl=10)
        self.assertEqual(two.hold_count, 2)
        self.assertEqual(two.fencing_token, one.fencing_token)
        two.release()
        self.assertTrue(a.describe("x").held)
        one.release()
        self.assertFalse(a.describe("x").held)

    def test_lease_outlives_its_ttl_while_renewed(self):
        a, b = self.client(), self.client()
        with a.lock("x", ttl=3.5) as lease:
            time.sleep(5)
            self.assertTrue(lease.valid())
            self.assertTrue(b.describe("x").held)

    def test_restarted_server_makes_the_lease_lost(self):
        a = self.client()
        fired = []
        lease = a.acquire("x", ttl=3.5, on_lost=fired.append)
        self.lockd.stop()
        self.lockd.start()  # memory backend: the hold is gone
        self.assertTrue(lease.lost.wait(5))
        self.assertTrue(wait_until(lambda: fired, 2))  # on_lost runs right after
        time.sleep(0.1)
        self.assertEqual(len(fired), 1)
        self.assertIsInstance(fired[0], lockd.LockLost)
        with self.assertRaises(lockd.LockLost):
            lease.release()

    def test_stopped_server_makes_the_lease_lost_when_validity_ends(self):
        a = self.client()
        lease = a.acquire("x", ttl=3.5)
        self.lockd.stop()
        self.assertTrue(lease.lost.wait(5))
        self.assertEqual(lease.lost_error.reason, "VALIDITY_EXPIRED")

    def test_acquire_retries_until_a_late_server_comes_up(self):
        self.lockd.stop()
        a = self.client()
        result = {}

        def acquire():
            result["lease"] = a.acquire("x", ttl=10, timeout=20)

        t = threading.Thread(target=acquire)
        t.start()
        time.sleep(0.5)
        self.lockd.start()
        up = time.monotonic()
        t.join(25)
        self.assertIn("lease", result)
        self.assertLess(time.monotonic() - up, 3)
        self.assertEqual(a.describe("x").hold_count, 1)  # retries did not double the hold

    def test_watchdog_reaches_a_restarted_server_before_validity_ends(self):
        a = self.client()
        fired = []
        # Session: valid for ttl*2/3 - K - drift = 3.25 s after the break.
        lease = a.acquire("x", ttl=8, on_lost=fired.append)
        self.lockd.stop()
        time.sleep(1.5)  # renewals fail; the channel backs off
        self.lockd.start()
        self.assertTrue(lease.lost.wait(10))
        self.assertTrue(wait_until(lambda: fired, 2))
        self.assertEqual(fired[0].reason, "LOCK_NOT_HELD")

    def test_unreachable_server_is_unavailable(self):
        c = lockd.Client("127.0.0.1:%d" % free_port(), rpc_timeout=0.5)
        self.clients.append(c)
        with self.assertRaises(lockd.Unavailable):
            c.acquire("x", ttl=10)
        with self.assertRaises(lockd.Unavailable):
            c.describe("x")

    def test_exception_in_the_block_releases_and_propagates(self):
        a = self.client()
        with self.assertRaises(ZeroDivisionError):
            with a.lock("x", ttl=10):
                1 / 0
        self.assertFalse(a.describe("x").held)

    def test_second_release_and_foreign_release_are_errors(self):
        a, b = self.client(), self.client()
        lease = a.acquire("x", ttl=10)
        with self.assertRaises(lockd.LockLost):
            b.release("x", b.owner)
        lease.release()
        with self.assertRaises(lockd.LockdError) as cm:
            lease.release()
        self.assertNotIsInstance(cm.exception, lockd.LockLost)

    def test_invalid_ttl_is_rejected_by_the_server(self):
        a = self.client()
        with self.assertRaises(lockd.LockdError) as cm:
            a.acquire("x", ttl=10 * 3600)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)

    @staticmethod
    def connect(client: lockd.Client) -> None:
        """Connected (and the session for ttl=30 opened) before any reply is
        held back."""
        client.describe("warm-up")
        client.try_acquire("warm-up", ttl=30).release()

    def test_acquire_whose_deadline_passes_while_lockd_grants_leaves_no_hold(self):
        proxy = self.proxy()
        # The proxy holds back keepalive ping acks too: pings every second
        # would break the connection as for a hung lockd, which is not what
        # this test is about. K = 18 s still lets ttl 30 s use the session.
        client = self.client(target=proxy.address, owner="late-reply", release_timeout=3,
                             keepalive_time=10, keepalive_timeout=8)
        observer = self.client()
        self.connect(client)
        for _ in range(3):
            proxy.hold_replies(True)
            result = {}

            def acquire():
                try:
                    result["lease"] = client.acquire("x", ttl=30, timeout=0.5)
                except lockd.LockdError as e:
                    result["error"] = e

            t = threading.Thread(target=acquire)
            t.start()
            # lockd grants at once and writes the reply, which the proxy keeps:
            # for lockd the reply went out, so only the client can give it back.
            self.assertTrue(wait_until(lambda: self.held_by(observer, "x", "late-reply")))
            # The deadline passes; the undo gets through (requests still flow).
            self.assertTrue(wait_until(lambda: not observer.describe("x").held, 5),
                            "the hold of an acquire that timed out was left behind")
            proxy.hold_replies(False)  # now the undo's answer arrives
            t.join(10)
            self.assertIsInstance(result.get("error"), lockd.Unavailable)
            self.assertIsNone(result["error"].unconfirmed_acquire_request_id)
            self.assertFalse(observer.describe("x").held)
        self.client().try_acquire("x", ttl=10).release()  # free for anyone

    def test_acquire_retried_after_its_reply_was_lost_leaves_hold_count_one(self):
        proxy = self.proxy()
        client = self.client(target=proxy.address, owner="retried")
        observer = self.client()
        self.connect(client)
        proxy.hold_replies(True)
        result = {}
        t = threading.Thread(target=lambda: result.update(
            lease=client.acquire("x", ttl=30, timeout=20)))
        t.start()
        self.assertTrue(wait_until(lambda: self.held_by(observer, "x", "retried")))
        # The connection breaks with the reply on its way: the attempt ends
        # UNAVAILABLE after lockd applied it, and the client retries.
        proxy.cut()
        proxy.hold_replies(False)
        t.join(25)
        lease = result["lease"]
        self.assertEqual(lease.hold_count, 1)
        info = observer.describe("x")
        self.assertEqual((info.held, info.owner, info.fencing_token),
                         (True, "retried", lease.fencing_token))
        self.assertEqual(info.hold_count, 1, "the retried acquire raised the hold count")
        lease.release()
        self.assertFalse(observer.describe("x").held, "a second hold was left behind")

    def test_release_or_renewal_of_an_older_hold_leaves_the_owners_new_hold_alone(self):
        # What a release or renewal of a lease finds when it reaches lockd
        # after its owner released the lock and took it again (a delayed
        # request): it names its hold by token, so it changes nothing.
        a, observer = self.client(), self.client()
        x, y = a.acquire("x", ttl=30), a.acquire("y", ttl=30)
        tokens = {name: self.regrant(name, a.owner, ttl=5) for name in ("x", "y")}
        self.assertGreater(tokens["x"], x.fencing_token)
        with self.assertRaises(lockd.LockLost):
            x.release()
        with self.assertRaises(lockd.LockLost):
            y.renew()
        for name in ("x", "y"):
            info = observer.describe(name)
            self.assertEqual((info.held, info.owner, info.fencing_token, info.hold_count),
                             (True, a.owner, tokens[name], 1), name)
            self.assertLessEqual(info.ttl_remaining, 5, name)  # not renewed to the old 30 s

    def test_list_describe_renew_and_release_by_owner(self):
        a = self.client(namespace="jobs")
        leases = [a.acquire(n, ttl=10, auto_renew=False) for n in ("r/1", "r/2", "s/1")]
        names = [i.name for i in a.list("r/", page_size=1)]
        self.assertEqual(names, ["r/1", "r/2"])
        ttl, token = a.renew("r/1", a.owner, ttl=20)
        self.assertAlmostEqual(ttl, 20)
        self.assertEqual(token, leases[0].fencing_token)
        self.assertEqual(a.release("s/1", a.owner), (True, 0))
        self.assertFalse(a.describe("s/1").held)
        self.assertEqual(a.describe("r/2").namespace, "jobs")
        for lease in leases[:2]:
            lease.release()


class LockdUnaryTest(LockdTest):
    USE_SESSIONS = False


if __name__ == "__main__":
    unittest.main()
