"""Tests of what the Session stream changes in the lockd Python client, against
the real lockd binary (memory backend, started per test by test_client's
LockdTestBase). The behaviour sessions share with the unary path is tested by
test_client.LockdTest (sessions) and LockdUnaryTest (unary RPCs).

The memory backend loses every hold when lockd restarts, so resuming after a
restart is not tested here: test_lease_is_lost_when_its_lockd_restarts checks
that such a lease becomes lost, and test_broken_stream_is_resumed resumes
after the connection (not lockd) broke.

A lease goes over a session only when ttl*2/3 - drift exceeds K =
keepalive_time + keepalive_timeout (4 s by default, 2 s for the clients of
LockdTestBase.client): the ttls below are long enough for that.
"""

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest

import grpc

import lockd
from test_client import Lockd, LockdTestBase, free_port, wait_until


def _unary_forbidden(*args, **kwargs):
    raise AssertionError("a unary RPC was used where the session should be")


class SessionTest(LockdTestBase):
    def test_acquire_and_release_go_over_the_stream(self):
        a, observer = self.client(), self.client()
        a._core.stub.Acquire = a._core.stub.Release = a._core.stub.Renew = _unary_forbidden
        lease = a.acquire("orders/42", ttl=10)
        info = observer.describe("orders/42")
        self.assertEqual((info.held, info.owner, info.fencing_token),
                         (True, a.owner, lease.fencing_token))
        again = a.acquire("orders/42", ttl=10)  # reentrant, same session
        self.assertEqual((again.hold_count, again.fencing_token), (2, lease.fencing_token))
        again.release()
        lease.release()
        self.assertFalse(observer.describe("orders/42").held)

    def test_release_of_a_hold_gone_meanwhile_is_lock_lost(self):
        a = self.client()
        lease = a.acquire("x", ttl=10)
        self.assertEqual(a.release("x", a.owner), (True, 0))  # behind the session's back
        with self.assertRaises(lockd.LockLost) as cm:
            lease.release()  # over the session: lockd's LOCK_NOT_HELD in the result
        self.assertEqual(cm.exception.reason, "LOCK_NOT_HELD")

    def test_lockd_renews_the_lease_without_a_watchdog(self):
        a, observer = self.client(), self.client()
        lease = a.acquire("x", ttl=3.5)
        time.sleep(5)  # longer than its lease
        self.assertTrue(lease.valid())
        self.assertFalse(lease.lost.is_set())
        info = observer.describe("x")
        self.assertEqual((info.held, info.owner, info.fencing_token),
                         (True, a.owner, lease.fencing_token))
        self.assertIsNone(a._watchdog._thread, "a watchdog thread was started")
        lease.release()
        self.assertFalse(observer.describe("x").held)

    def test_force_release_makes_the_lease_lost_once(self):
        a, admin = self.client(), self.client()
        fired = []
        lease = a.acquire("x", ttl=10, on_lost=fired.append)
        released, previous = admin.force_release("x", "test", fencing_token=lease.fencing_token)
        self.assertTrue(released)
        self.assertEqual(previous.owner, a.owner)
        self.assertTrue(lease.lost.wait(5))
        self.assertEqual(lease.lost_error.reason, "FORCE_RELEASED")
        self.assertFalse(lease.valid())
        time.sleep(0.2)
        self.assertEqual([e.reason for e in fired], ["FORCE_RELEASED"])
        with self.assertRaises(lockd.LockLost):
            lease.release()
        # The client's next grant of the lock is a new hold with a new token.
        again = a.try_acquire("x", ttl=10)
        self.assertGreater(again.fencing_token, lease.fencing_token)
        again.release()

    def _holder(self, keep_on_disconnect: bool) -> subprocess.Popen:
        """A process holding "x" (ttl 30 s) over a session until killed."""
        package = os.path.dirname(os.path.dirname(lockd.__file__))
        script = textwrap.dedent("""
            import sys, time
            sys.path.insert(0, %r)
            import lockd
            client = lockd.Client(%r, keep_on_disconnect=%r)
            lease = client.acquire("x", ttl=30)
            print(client.owner, flush=True)
            time.sleep(120)
        """ % (package, self.lockd.address, keep_on_disconnect))
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        self.addCleanup(proc.stdout.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc

    def test_killed_client_process_frees_its_locks_at_once(self):
        observer = self.client()
        proc = self._holder(keep_on_disconnect=False)
        owner = proc.stdout.readline().strip()
        self.assertTrue(owner)
        self.assertTrue(self.held_by(observer, "x", owner))
        proc.kill()  # SIGKILL: no release, no half-close
        killed = time.monotonic()
        self.assertTrue(wait_until(lambda: not observer.describe("x").held, 1.0),
                        "the lock of a killed client was still held after 1 s")
        self.assertLess(time.monotonic() - killed, 1.0)

    def test_killed_client_keeping_its_locks_on_disconnect_holds_them_to_their_lease(self):
        # The default (keep_on_disconnect=True) lets a reconnect resume, so
        # a vanished client's locks end with their lease, not at once.
        observer = self.client()
        proc = self._holder(keep_on_disconnect=True)
        owner = proc.stdout.readline().strip()
        proc.kill()
        time.sleep(1.5)
        self.assertTrue(self.held_by(observer, "x", owner))
        observer.force_release("x", "test cleanup")

    def test_acquire_cancelled_at_its_deadline_leaves_no_hold(self):
        a, b = self.client(), self.client()
        first = a.acquire("x", ttl=10)
        start = time.monotonic()
        with self.assertRaises(lockd.LockNotAcquired) as cm:
            b.acquire("x", ttl=10, wait=30, timeout=0.5)  # waiting in lockd when cancelled
        self.assertLess(time.monotonic() - start, 2.5)
        self.assertIsNone(cm.exception.unconfirmed_acquire_request_id)
        first.release()
        time.sleep(0.3)  # a waiter left behind would be granted now
        self.assertFalse(a.describe("x").held, "the cancelled acquire was granted")
        # A waiting acquire of the session does not delay its other operations.
        held = a.acquire("y", ttl=10)
        errors = []

        def wait_for_y():
            try:
                b.acquire("y", ttl=10, wait=30, timeout=2)
            except lockd.LockdError as e:
                errors.append(e)

        waiting = threading.Thread(target=wait_for_y)
        waiting.start()
        time.sleep(0.3)
        quick_start = time.monotonic()
        b.try_acquire("z", ttl=10).release()
        self.assertLess(time.monotonic() - quick_start, 1.0)
        waiting.join(10)
        self.assertEqual([type(e) for e in errors], [lockd.LockNotAcquired])
        held.release()

    def test_interrupted_waiting_acquire_is_cancelled_and_leaves_no_hold(self):
        a, b = self.client(), self.client()
        held = a.acquire("x", ttl=10)
        b.try_acquire("warm-up", ttl=10).release()  # session open: the acquire waits in lockd
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        self.addCleanup(timer.cancel)
        with self.assertRaises(KeyboardInterrupt):
            b.acquire("x", ttl=10, wait=30)
        held.release()
        time.sleep(0.3)  # a waiter left behind would be granted now
        self.assertFalse(a.describe("x").held, "the interrupted acquire was granted")
        b.try_acquire("x", ttl=10).release()  # the session still works

    def test_grant_after_the_caller_gave_up_is_given_back(self):
        # The cancel of an acquire whose caller stops waiting can reach lockd
        # after the caller's undo, and then after the grant (a loaded
        # client). Here it never reaches it: lockd grants the abandoned
        # acquire when the lock frees, and the client must give it back.
        a, b = self.client(), self.client(release_timeout=0.5)
        held = a.acquire("x", ttl=10)
        b.try_acquire("warm-up", ttl=10).release()
        b._session._cancel = lambda op_id, op: None
        with self.assertRaises(lockd.LockNotAcquired):
            b.acquire("x", ttl=10, wait=30, timeout=0.5)
        held.release()
        self.assertTrue(wait_until(lambda: not a.describe("x").held, 3),
                        "the abandoned acquire's grant was kept")
        b.try_acquire("x", ttl=10).release()  # the session still works

    def test_broken_stream_is_resumed_with_its_leases(self):
        proxy = self.proxy()
        a = self.client(target=proxy.address, initial_backoff=0.02, max_backoff=0.2)
        observer = self.client()
        fired = []
        lease = a.acquire("x", ttl=4.5, on_lost=fired.append)
        proxy.cut()  # the stream breaks; lockd keeps the hold to its lease
        # Past its lease the hold is still there with its token: the
        # reconnected session resumed it and lockd renews it again.
        time.sleep(6)
        self.assertEqual(fired, [])
        self.assertTrue(lease.valid())
        info = observer.describe("x")
        self.assertEqual((info.held, info.owner, info.fencing_token),
                         (True, a.owner, lease.fencing_token))
        lease.release()
        self.assertFalse(observer.describe("x").held)

    def test_lease_is_lost_when_its_lockd_restarts(self):
        # Memory backend: the restarted lockd holds nothing, so the resume
        # is refused and the lease is lost (with a shared backend such as
        # Redis the hold would be resumed).
        a = self.client()
        fired = []
        lease = a.acquire("x", ttl=9, on_lost=fired.append)
        a._core.stub.Renew = _unary_forbidden
        self.lockd.stop()
        self.lockd.start()
        # Lost before its validity (ttl*2/3 - K - drift = 3.9 s) ends: the
        # resume was refused.
        self.assertTrue(lease.lost.wait(3.5))
        self.assertTrue(wait_until(lambda: fired, 2))
        self.assertEqual([e.reason for e in fired], ["LOCK_NOT_HELD"])
        self.assertFalse(a.describe("x").held)
        again = a.try_acquire("x", ttl=5)  # the client keeps working
        again.release()

    def test_collected_lease_is_released_over_the_session(self):
        a, observer = self.client(), self.client()
        a._core.stub.Release = _unary_forbidden
        lease = a.acquire("x", ttl=10)
        del lease
        gc.collect()
        self.assertTrue(wait_until(lambda: not observer.describe("x").held, 3))

    def test_acquire_for_another_owner_uses_the_unary_rpcs(self):
        a = self.client()
        lease = a.acquire("x", ttl=10, owner="someone-else")
        self.assertIsNone(a._session)
        self.assertEqual(a.describe("x").owner, "someone-else")
        lease.release()

    def test_close_leaves_the_holds_to_their_lease_or_frees_them(self):
        a, observer = self.client(), self.client()
        kept = a.acquire("kept", ttl=10)
        detached = a.acquire("detached", ttl=10)
        detached.detach()
        a.close()  # like a break: keep_on_disconnect (the default) keeps the holds
        for name in ("kept", "detached"):
            self.assertTrue(self.held_by(observer, name, a.owner), name)
        self.assertFalse(kept.lost.is_set())
        # Valid for ttl*2/3 - K - drift (K = 2 s) from the close.
        self.assertTrue(kept.valid())
        self.assertLess(kept.remaining(), 10 * 2 / 3 - 2 - 0.1)
        self.assertGreater(kept.remaining(), 10 * 2 / 3 - 2 - 0.1 - 1)
        b = self.client(keep_on_disconnect=False)
        freed = b.acquire("freed", ttl=10)
        b.close()
        self.assertTrue(wait_until(lambda: not observer.describe("freed").held, 1.0))
        self.assertEqual(freed.lost_error.reason, "CLIENT_CLOSED")

    def test_refused_session_lease_is_the_acquire_error(self):
        a = self.client()
        with self.assertRaises(lockd.LockdError) as cm:
            a.acquire("x", ttl=10 * 3600)
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        # The refused session holds nothing: a new one replaces it, whose
        # lease is the next acquire's ttl.
        lease = a.acquire("x", ttl=10)
        self.assertEqual((a._session.ttl, lease.valid_until), (10, float("inf")))
        lease.release()

    def test_hung_lockd_makes_the_lease_lost_within_two_thirds_of_its_ttl(self):
        # SIGSTOP: the connection stays open but nothing answers (a hung
        # replica, or a partition that drops packets). Keepalive breaks the
        # stream within K = 2 s, and the lease ends at the break - K +
        # ttl*2/3 - drift, before lockd can let the hold go (ttl*2/3 after
        # its last renewal) and grant it to someone else.
        ttl = 6
        a = self.client(keepalive_time=1, keepalive_timeout=1)  # K = 2 s
        a._core.stub.Renew = _unary_forbidden
        fired = []
        lease = a.acquire("x", ttl=ttl, on_lost=fired.append)
        self.assertEqual(a._session.ttl, ttl)
        os.kill(self.lockd.proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            time.sleep(max(0.0, stopped + 0.5 - time.monotonic()))
            self.assertTrue(lease.valid(), "lost as soon as lockd stopped")
            self.assertTrue(
                wait_until(lambda: fired, ttl * 2 / 3 + 1 - (time.monotonic() - stopped)),
                "on_lost not called within ttl*2/3 + 1 s of lockd hanging")
            self.assertLess(time.monotonic() - stopped, ttl * 2 / 3 + 1)
        finally:
            os.kill(self.lockd.proc.pid, signal.SIGCONT)
        self.assertEqual([e.reason for e in fired], ["VALIDITY_EXPIRED"])
        self.assertFalse(lease.valid())
        self.assertTrue(lease.lost.is_set())
        with self.assertRaises(lockd.LockLost):
            lease.release()

    def test_short_ttl_goes_over_the_unary_path(self):
        # K = 2 s: a session lease needs ttl*2/3 - drift > 2, i.e. ttl > 3.06 s.
        a, observer = self.client(keepalive_time=1, keepalive_timeout=1), self.client()
        short = a.acquire("short", ttl=3)
        self.assertIsNone(a._session)
        self.assertIsNotNone(a._watchdog._thread)  # renewed by the watchdog
        self.assertLess(short.valid_until, time.monotonic() + 3)  # send-time validity
        release = a._core.stub.Release
        a._core.stub.Acquire = a._core.stub.Release = _unary_forbidden  # Renew: the watchdog's
        long = a.acquire("long", ttl=3.2)
        self.assertEqual(a._session.ttl, 3.2)
        self.assertEqual(long.valid_until, float("inf"))
        default = a.acquire("default")  # no ttl: the session's lease
        self.assertEqual((default.ttl, default.valid_until), (3.2, float("inf")))
        for lease in (default, long):
            lease.release()
        self.assertTrue(self.held_by(observer, "short", a.owner))
        a._core.stub.Release = release
        short.release()
        self.assertFalse(observer.describe("short").held)

    def test_one_session_with_one_lease_other_ttls_go_unary(self):
        # The Client's one session has one lease, the ttl of the acquire
        # that opened it (clients/testdata/acquire_paths.json): another ttl
        # goes unary, renewed by the watchdog; no ttl takes the session's.
        a, observer = self.client(), self.client()
        first = a.acquire("first", ttl=10)
        session = a._session
        other = a.acquire("other", ttl=20)
        self.assertIs(a._session, session)
        self.assertEqual((session.ttl, first.valid_until), (10, float("inf")))
        self.assertEqual(other.ttl, 20)
        self.assertLess(other.valid_until, time.monotonic() + 20)  # send-time validity
        self.assertIsNotNone(a._watchdog._thread)
        a._core.stub.Acquire = _unary_forbidden
        default = a.acquire("default")
        self.assertEqual((default.ttl, default.valid_until), (10, float("inf")))
        for lease in (first, other, default):
            self.assertTrue(self.held_by(observer, lease.name, a.owner), lease.name)
            lease.release()
            self.assertFalse(observer.describe(lease.name).held, lease.name)

    def test_server_default_ttl_too_short_goes_unary_once_known(self):
        short_default = Lockd(self.tmp, free_port(), "--lease.default=3s")
        short_default.start()
        self.addCleanup(short_default.stop)
        a = self.client(target=short_default.address)  # K = 2 s: 3 s is too short
        first = a.acquire("first")  # the default is unknown yet: over a session
        self.assertEqual((a._session.ttl, first.ttl), (None, 3))
        self.assertEqual(first.valid_until, float("inf"))
        second = a.acquire("second")  # now known: unary, renewed by the watchdog
        self.assertEqual(second.ttl, 3)
        self.assertLess(second.valid_until, time.monotonic() + 3)
        self.assertIsNotNone(a._watchdog._thread)
        second.release()
        first.release()

    def test_keepalive_arguments_out_of_range_are_value_errors(self):
        for kwargs, named in ((dict(keepalive_time=0.5), "keepalive_time"),
                              (dict(keepalive_timeout=0), "keepalive_timeout"),
                              (dict(keepalive_timeout=-1), "keepalive_timeout")):
            with self.assertRaises(ValueError) as cm:
                lockd.Client(self.lockd.address, **kwargs)
            self.assertIn(named, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
