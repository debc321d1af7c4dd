"""Tests of shared locks, semaphores and acquire_all in the lockd Python
client: against FakeService (what each call sends, the reasons of lockd's
refusals, the undo of an acquire_all on every lock) and against the real
lockd on the memory backend, over sessions and over the unary RPCs.

Run by lockd_python_wheel_test with test_client.py, whose FakeService and
LockdTestBase it reuses.
"""

import concurrent.futures
import threading
import time
import unittest

import grpc

import lockd
from lockd._proto.google.rpc import error_details_pb2, status_pb2
from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc
import test_client as base  # a module, so that its test classes are not run again here


def refused(reason, **metadata):
    """(code, details, trailing metadata) of a lockd refusal with ``reason``."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain="lockd", metadata=metadata)
    st = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0], message="refused")
    st.details.add().Pack(info)
    return (grpc.StatusCode.FAILED_PRECONDITION, "refused",
            (("grpc-status-details-bin", st.SerializeToString()),))


class KindsFakeService(base.FakeService):
    """FakeService plus AcquireAll (grants every lock, tokens 100, 101, ...;
    the first ``fail_acquire_alls`` calls answer UNAVAILABLE) and refusals
    with trailing metadata (``acquire_refusal``)."""

    def __init__(self):
        super().__init__()
        self.acquire_alls = []
        self.fail_acquire_alls = 0
        self.acquire_refusal = None

    def Acquire(self, request, context):
        if self.acquire_refusal is not None:
            code, details, trailing = self.acquire_refusal
            context.set_trailing_metadata(trailing)
            context.abort(code, details)
        return super().Acquire(request, context)

    def AcquireAll(self, request, context):
        with self.mu:
            self.acquire_alls.append(request)
            self.log.append("acquire_all " + request.request_id)
            fail = self.fail_acquire_alls > 0
            if fail:
                self.fail_acquire_alls -= 1
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "backend down")
        resp = lock_pb2.AcquireAllResponse(acquired=True, owner=request.owner)
        for i, _ in enumerate(request.locks):
            r = resp.locks.add(acquired=True, owner=request.owner, fencing_token=100 + i,
                               hold_count=1)
            r.lease_ttl.CopyFrom(request.lease_ttl)
        return resp


class KindsFakeServerTest(unittest.TestCase):
    def setUp(self):
        self.service = KindsFakeService()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        lock_pb2_grpc.add_LockServiceServicer_to_server(self.service, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.addCleanup(self.server.stop, None)  # after the client closes (cleanups run LIFO)
        self.client = base.FakeServerTest.make_client(self)

    def test_acquire_shared_sends_mode_shared(self):
        lease = self.client.acquire_shared("catalog", ttl=10)
        self.assertEqual(self.service.acquires[-1].mode, lock_pb2.LOCK_MODE_SHARED)
        self.assertEqual(lease.mode, "shared")
        lease.detach()

    def test_semaphore_sends_limit_and_permits(self):
        lease = self.client.semaphore("api", 4, namespace="jobs").acquire(3, ttl=10)
        req = self.service.acquires[-1]
        self.assertEqual((req.namespace, req.name, req.limit, req.permits), ("jobs", "api", 4, 3))
        self.assertEqual((lease.limit, lease.permits), (4, 3))
        lease.detach()

    def test_semaphore_rejects_permits_out_of_range_without_sending(self):
        for limit, permits in ((4, 5), (4, 0), (0, 1), (10001, 1)):
            with self.assertRaises(lockd.LockdError) as cm:
                self.client.semaphore("api", limit).acquire(permits)
            self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(self.service.acquires, [])

    def test_kind_refusals_carry_their_reason(self):
        self.service.acquire_refusal = refused("LOCK_KIND_MISMATCH", kind="semaphore", limit="4")
        with self.assertRaises(lockd.LockdError) as cm:
            self.client.acquire_shared("api")
        e = cm.exception
        self.assertNotIsInstance(e, lockd.LockLost)
        self.assertEqual(e.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(e.reason, "LOCK_KIND_MISMATCH")
        self.assertEqual(e.metadata, {"kind": "semaphore", "limit": "4"})
        self.assertIn("[LOCK_KIND_MISMATCH kind=semaphore limit=4]", str(e))
        self.assertEqual(self.service.releases, [])  # a definite answer: nothing to undo
        self.service.acquire_refusal = refused("UPGRADE_WOULD_BLOCK")
        with self.assertRaises(lockd.LockdError) as cm:
            self.client.acquire("catalog")
        self.assertEqual(cm.exception.reason, "UPGRADE_WOULD_BLOCK")

    def test_acquire_all_sends_every_lock_and_returns_a_lease_per_lock(self):
        held = self.client.acquire_all(
            ["acct/2", lockd.LockSpec("catalog", mode="shared"),
             lockd.LockSpec("api", namespace="jobs", limit=4, permits=2)], ttl=10, wait=5)
        req = self.service.acquire_alls[-1]
        self.assertEqual(req.owner, "test-owner")
        self.assertEqual([(s.namespace, s.name) for s in req.locks],
                         [("default", "acct/2"), ("default", "catalog"), ("jobs", "api")])
        self.assertEqual(req.locks[1].mode, lock_pb2.LOCK_MODE_SHARED)
        self.assertEqual((req.locks[2].limit, req.locks[2].permits), (4, 2))
        self.assertEqual(self.service.acquires, [])
        self.assertEqual([l.fencing_token for l in held], [100, 101, 102])
        self.assertEqual(held[1].mode, "shared")
        self.assertTrue(held.valid())
        with held:
            pass  # released on exit, each with its own token
        self.assertEqual(sorted((r.name, r.fencing_token) for r in self.service.releases),
                         [("acct/2", 100), ("api", 102), ("catalog", 101)])

    def test_acquire_all_with_an_unknown_outcome_is_undone_on_every_lock(self):
        self.service.fail_acquire_alls = 1
        held = self.client.acquire_all(["a", "b"], ttl=10)
        ids = [r.request_id for r in self.service.acquire_alls]
        self.assertEqual(len(ids), 2)
        self.assertNotEqual(ids[0], ids[1])  # the undo was confirmed: a new request_id
        self.assertEqual(sorted((r.name, r.acquire_request_id) for r in self.service.releases),
                         [("a", ids[0]), ("b", ids[0])])
        for lease in held:
            lease.detach()


class KindsLockdTest(base.LockdTestBase):
    """Against lockd (memory backend), over sessions; KindsLockdUnaryTest
    runs the same over the unary RPCs."""

    def test_readers_overlap_and_a_writer_waits_for_them(self):
        a, b, w = self.client(), self.client(), self.client()
        ra = a.acquire_shared("catalog", ttl=10)
        rb = b.acquire_shared("catalog", ttl=10, wait=2)  # granted beside ra
        self.assertNotEqual(ra.fencing_token, rb.fencing_token)
        info = w.describe("catalog")
        self.assertEqual(info.mode, "shared")
        self.assertEqual(sorted(h.owner for h in info.holders), sorted([a.owner, b.owner]))
        with self.assertRaises(lockd.LockNotAcquired):
            w.acquire("catalog", ttl=10, wait=0.2)
        ra.release()
        rb.release()
        with w.lock("catalog", ttl=10, wait=5) as writer:
            self.assertGreater(writer.fencing_token, rb.fencing_token)

    def test_semaphore_admits_up_to_its_limit(self):
        clients = [self.client() for _ in range(3)]
        leases = [c.semaphore("api", 4).acquire(2, ttl=10) for c in clients[:2]]
        with self.assertRaises(lockd.LockNotAcquired):
            clients[2].semaphore("api", 4).acquire(1, ttl=10, wait=0.2)
        info = clients[2].describe("api")
        self.assertEqual(info.limit, 4)
        self.assertEqual(sorted(h.permits for h in info.holders), [2, 2])
        leases[0].release()
        with clients[2].semaphore("api", 4).hold(2, ttl=10, wait=5) as lease:
            self.assertEqual(lease.permits, 2)
        leases[1].release()

    def test_another_kind_is_refused_at_once_with_its_reason(self):
        a, b = self.client(), self.client()
        with a.semaphore("api", 4).hold(1, ttl=10):
            start = time.monotonic()
            with self.assertRaises(lockd.LockdError) as cm:
                b.acquire_shared("api", ttl=10, wait=5)
            self.assertLess(time.monotonic() - start, 4)  # at once, whatever the wait
            self.assertEqual(cm.exception.reason, "LOCK_KIND_MISMATCH")
            self.assertEqual(cm.exception.metadata.get("kind"), "semaphore")
            with self.assertRaises(lockd.LockdError) as cm:
                b.semaphore("api", 5).acquire(1, ttl=10)
            self.assertEqual(cm.exception.reason, "LOCK_KIND_MISMATCH")

    def test_shared_lease_released_by_a_lost_session_frees_only_its_hold(self):
        # Each holder is on its own: one reader's release leaves the other.
        a, b = self.client(), self.client()
        ra, rb = a.acquire_shared("x", ttl=10), b.acquire_shared("x", ttl=10)
        ra.release()
        info = b.describe("x")
        self.assertEqual([h.owner for h in info.holders], [b.owner])
        self.assertTrue(rb.valid())
        rb.release()
        self.assertFalse(b.describe("x").held)

    def test_acquire_all_takes_every_lock_or_none(self):
        a, b = self.client(), self.client()
        other = b.acquire("acct/2", ttl=10)
        with self.assertRaises(lockd.LockNotAcquired) as cm:
            a.acquire_all(["acct/1", "acct/2"], ttl=10)
        self.assertEqual(cm.exception.holder.name, "acct/2")
        self.assertFalse(b.describe("acct/1").held)  # given back: all or nothing
        other.release()
        with a.lock_all(["acct/2", "acct/1"], ttl=10, wait=5) as both:
            self.assertEqual([lease.name for lease in both], ["acct/2", "acct/1"])
            self.assertTrue(b.describe("acct/1").held)
        self.assertFalse(b.describe("acct/1").held)

    def test_opposite_orders_do_not_deadlock(self):
        a, b = self.client(), self.client()
        failures = []

        def run(client, order):
            for _ in range(10):
                try:
                    with client.lock_all(order, ttl=10, wait=10):
                        pass
                except lockd.LockdError as e:
                    failures.append(e)

        threads = [threading.Thread(target=run, args=(a, ["x", "y"])),
                   threading.Thread(target=run, args=(b, ["y", "x"]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])


class KindsLockdUnaryTest(KindsLockdTest):
    USE_SESSIONS = False


if __name__ == "__main__":
    unittest.main()
