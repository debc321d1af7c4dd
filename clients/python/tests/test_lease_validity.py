"""The lease-validity formulas of the Python client (lockd._validity, and
ClientCore.session_safe, which maps the server's default ttl, None, to
the vectors' ttl 0) against the vectors every client's tests read:
clients/testdata/lease_validity.json, found from this file's own path (the
tests run from the source tree; see test_client.py). Needs no lockd.
"""

import json
import os
import unittest

from lockd import _validity
from lockd._core import ClientCore

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                       "testdata", "lease_validity.json")


def _load():
    with open(VECTORS) as f:
        return json.load(f)


def _s(ms: float) -> float:
    return ms / 1000.0


def _drift(v) -> float:
    return _validity.drift(_s(v["ttl_ms"]), v["clock_drift_factor"],
                           _s(v["min_clock_drift_ms"]))


class LeaseValidityVectorsTest(unittest.TestCase):
    def setUp(self):
        self.vectors = _load()

    def assertMillis(self, seconds: float, want_ms: float, vector) -> None:
        self.assertAlmostEqual(seconds * 1000.0, want_ms, delta=1e-6, msg=repr(vector))

    def test_unary(self):
        self.assertTrue(self.vectors["unary"])
        for v in self.vectors["unary"]:
            got = _validity.unary_valid_until(_s(v["send_ms"]), _s(v["ttl_ms"]), _drift(v))
            self.assertMillis(got, v["valid_until_ms"], v)

    def test_session_break(self):
        self.assertTrue(self.vectors["session_break"])
        for v in self.vectors["session_break"]:
            got = _validity.session_break_valid_until(
                _s(v["break_noticed_ms"]), _s(v["hang_bound_ms"]), _s(v["ttl_ms"]), _drift(v))
            self.assertMillis(got, v["valid_until_ms"], v)

    def test_session_safe(self):
        self.assertTrue(self.vectors["session_safe"])
        for v in self.vectors["session_safe"]:
            got = _validity.session_safe(_s(v["ttl_ms"]), _drift(v), _s(v["hang_bound_ms"]))
            self.assertIs(got, v["session_safe"], repr(v))

    def test_client_core_uses_the_same_formulas(self):
        # What the Client computes with: its drift settings and hang bound;
        # ttl None (the server's default, unknown) is the vectors' ttl 0.
        for v in self.vectors["session_safe"]:
            core = ClientCore(None, owner="o", namespace="", rpc_timeout=1, release_timeout=1,
                              initial_backoff=0.05, max_backoff=1,
                              clock_drift_factor=v["clock_drift_factor"],
                              min_clock_drift=_s(v["min_clock_drift_ms"]),
                              hang_bound=_s(v["hang_bound_ms"]))
            ttl = _s(v["ttl_ms"]) or None
            self.assertIs(core.session_safe(ttl), v["session_safe"], repr(v))
            self.assertAlmostEqual(core.drift(_s(v["ttl_ms"])), _drift(v), delta=1e-12)


if __name__ == "__main__":
    unittest.main()
