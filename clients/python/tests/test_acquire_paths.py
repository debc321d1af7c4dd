"""The path rules of the Python clients (lockd.Client._choose_path and
lockd.aio.Client._choose_path: over the Client's Session stream or by the
unary RPCs) against the vectors every client's tests read:
clients/testdata/acquire_paths.json, found from this file's own path (its
"description" defines the rows). Each row is one fresh Client making the
row's acquires in order; each is checked against its path, then its event is
played for real:

* ``no_session_stream``: an acquire against an in-process gRPC server with
  no services (every method UNIMPLEMENTED, as a lockd without sessions);
* ``session_opened``: an acquire over the session against the lockd binary
  ($LOCKD_BINARY, memory backend) started with ``--lease.default`` = the
  event's lease, so that the session's opened.lease_ttl is that lease.

Both clients play every row, the asyncio one in an event loop of its own.
"""

import asyncio
import concurrent.futures
import json
import os
import shutil
import tempfile
import unittest

import grpc

import lockd
import lockd.aio
from test_client import Lockd, free_port

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "testdata", "acquire_paths.json")


def _load():
    with open(VECTORS) as f:
        return json.load(f)


def _seconds(ms):
    """The vectors' ttl_ms as the client's ttl argument (0: None, lockd's default)."""
    return ms / 1000.0 if ms else None


def _path(client, acquire) -> str:
    """The path ``client`` (either kind) chooses for ``acquire``."""
    owner = "someone-else" if acquire.get("other_owner") else None
    session = client._choose_path(_seconds(acquire["ttl_ms"]), owner,
                                  acquire.get("auto_renew", True))
    return "unary" if session is None else "session"


class AcquirePathVectorsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vectors = _load()
        cls.tmp = tempfile.mkdtemp(prefix="lockd-paths-")
        cls.lockds = {}  # default lease (ms) -> Lockd
        # A server with no services: every RPC answers UNIMPLEMENTED.
        cls.bare = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        cls.bare_address = "127.0.0.1:%d" % cls.bare.add_insecure_port("127.0.0.1:0")
        cls.bare.start()

    @classmethod
    def tearDownClass(cls):
        for server in cls.lockds.values():
            server.stop()
        cls.bare.stop(None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def _lockd_with_default_lease(self, lease_ms):
        if lease_ms not in self.lockds:
            server = Lockd(self.tmp, free_port(), "--lease.default=%dms" % lease_ms)
            server.start()
            self.lockds[lease_ms] = server
        return self.lockds[lease_ms].address

    def _target(self, row):
        """Where the row's Client connects: the lockd its events need, else
        the bare server (choosing a path sends nothing)."""
        for a in row["acquires"]:
            then = a.get("then") or {}
            if then.get("event") == "session_opened":
                return self._lockd_with_default_lease(then["lease_ms"])
        return self.bare_address

    def _options(self, row):
        """The keyword arguments of the row's Client (either kind)."""
        settings = dict(self.vectors["client_defaults"], **row["client"])
        return dict(owner="vector-owner", rpc_timeout=3.0, release_timeout=0.5,
                    use_sessions=settings["use_sessions"],
                    keepalive_time=settings["keepalive_time_ms"] / 1000.0,
                    keepalive_timeout=settings["keepalive_timeout_ms"] / 1000.0,
                    clock_drift_factor=settings["clock_drift_factor"],
                    min_clock_drift=settings["min_clock_drift_ms"] / 1000.0)

    def _check_event(self, then, outcome):
        """``outcome``: the lease of the event's acquire, or what it raised."""
        if then["event"] == "no_session_stream":
            self.assertIsInstance(outcome, lockd.LockdError)
            self.assertEqual(outcome.code, grpc.StatusCode.UNIMPLEMENTED)
        elif then["event"] == "session_opened":
            self.assertNotIsInstance(outcome, lockd.LockdError)
            self.assertAlmostEqual(outcome.ttl, then["lease_ms"] / 1000.0)
        else:
            self.fail("unknown event %r" % then["event"])

    def test_every_row_of_the_shared_table(self):
        rows = self.vectors["rows"]
        self.assertEqual(len(rows), 8)  # one per row of the table
        for row in rows:
            client = lockd.Client(self._target(row), **self._options(row))
            self.addCleanup(client.close)
            for i, acquire in enumerate(row["acquires"]):
                with self.subTest(row=row["row"], acquire=i):
                    self.assertEqual(_path(client, acquire), acquire["path"])
                    then = acquire.get("then")
                    if then is None:
                        continue
                    try:
                        outcome = client.acquire("orders/42", ttl=_seconds(acquire["ttl_ms"]))
                        self.addCleanup(outcome.release)
                    except lockd.LockdError as e:
                        outcome = e
                    self._check_event(then, outcome)

    def test_every_row_of_the_shared_table_aio(self):
        asyncio.run(self._every_row_aio())

    async def _every_row_aio(self):
        for row in self.vectors["rows"]:
            client = lockd.aio.Client(self._target(row), **self._options(row))
            try:
                for i, acquire in enumerate(row["acquires"]):
                    with self.subTest(row=row["row"], acquire=i, client="aio"):
                        self.assertEqual(_path(client, acquire), acquire["path"])
                        then = acquire.get("then")
                        if then is None:
                            continue
                        try:
                            outcome = await client.acquire(
                                "orders/42", ttl=_seconds(acquire["ttl_ms"]))
                        except lockd.LockdError as e:
                            outcome = e
                        self._check_event(then, outcome)
                        if isinstance(outcome, lockd.aio.Lease):
                            await outcome.release()
            finally:
                await client.close()


if __name__ == "__main__":
    unittest.main()
