"""The path rules of the Python client (lockd.Client._choose_path: over a
Session stream or by the unary RPCs) against the vectors every client's
tests read: clients/testdata/acquire_paths.json, found from this file's own
path (its "description" defines the rows). Each row is one fresh Client
making the row's acquires in order; each is checked against its path, then
its event is played for real:

* ``no_session_stream``: an acquire against an in-process gRPC server with
  no services (every method UNIMPLEMENTED, as a lockd without sessions);
* ``session_opened``: an acquire over the session against the lockd binary
  ($LOCKD_BINARY, memory backend) started with ``--lease.default`` = the
  event's lease, so that the session's opened.lease_ttl is that lease.

KNOWN_DIFFERENCES lists the steps where this client chooses otherwise than
the table (the C++ client's, acquire_path.h): they are checked to still
differ, so that a fix shows up as a failure here and its entry goes.
"""

import concurrent.futures
import json
import os
import shutil
import tempfile
import unittest

import grpc

import lockd
from test_client import Lockd, free_port

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "testdata", "acquire_paths.json")

# (row, acquire index) -> the path this client takes instead, and why.
KNOWN_DIFFERENCES = {
    ("the call's ttl is neither 0 nor the session's lease (asked or granted)", 1): (
        "session",
        "the Python client keeps one session per lease ttl (docs/clients/python.md), so a "
        "second ttl opens a second session instead of going unary"),
}


def _load():
    with open(VECTORS) as f:
        return json.load(f)


def _seconds(ms):
    """The vectors' ttl_ms as the client's ttl argument (0: None, lockd's default)."""
    return ms / 1000.0 if ms else None


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

    def _client(self, row):
        settings = dict(self.vectors["client_defaults"], **row["client"])
        client = lockd.Client(
            self._target(row), owner="vector-owner", rpc_timeout=3.0, release_timeout=0.5,
            use_sessions=settings["use_sessions"],
            keepalive_time=settings["keepalive_time_ms"] / 1000.0,
            keepalive_timeout=settings["keepalive_timeout_ms"] / 1000.0,
            clock_drift_factor=settings["clock_drift_factor"],
            min_clock_drift=settings["min_clock_drift_ms"] / 1000.0)
        self.addCleanup(client.close)
        return client

    def _play(self, client, acquire):
        then = acquire.get("then")
        if then is None:
            return
        ttl = _seconds(acquire["ttl_ms"])
        if then["event"] == "no_session_stream":
            with self.assertRaises(lockd.LockdError) as cm:
                client.acquire("orders/42", ttl=ttl)
            self.assertEqual(cm.exception.code, grpc.StatusCode.UNIMPLEMENTED)
        elif then["event"] == "session_opened":
            lease = client.acquire("orders/42", ttl=ttl)
            self.addCleanup(lease.release)
            self.assertAlmostEqual(lease.ttl, then["lease_ms"] / 1000.0)
        else:
            self.fail("unknown event %r" % then["event"])

    def test_every_row_of_the_shared_table(self):
        rows = self.vectors["rows"]
        self.assertEqual(len(rows), 8)  # one per row of the table
        differences = []
        for row in rows:
            client = self._client(row)
            for i, acquire in enumerate(row["acquires"]):
                with self.subTest(row=row["row"], acquire=i):
                    owner = "someone-else" if acquire.get("other_owner") else None
                    session = client._choose_path(_seconds(acquire["ttl_ms"]), owner,
                                                  acquire.get("auto_renew", True))
                    got = "unary" if session is None else "session"
                    known = KNOWN_DIFFERENCES.get((row["row"], i))
                    if known is not None:
                        differences.append((row["row"], i))
                        self.assertEqual(got, known[0], "fixed? remove it from "
                                         "KNOWN_DIFFERENCES: " + known[1])
                    else:
                        self.assertEqual(got, acquire["path"])
                    self._play(client, acquire)
        self.assertEqual(sorted(differences), sorted(KNOWN_DIFFERENCES))


if __name__ == "__main__":
    unittest.main()
