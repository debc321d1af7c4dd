"""How long the client may trust a lease: the lease-validity formulas, the
only place they are written. Every client language computes the same
values; tests/test_lease_validity.py checks these functions against the shared
vectors in clients/testdata/lease_validity.json.

Times are seconds on the time.monotonic() clock. ``drift`` is the clock
drift allowance of a lease (drift()); ``hang_bound`` (K) is the longest a
hung lockd can go unnoticed on the Client's channel, keepalive_time +
keepalive_timeout (lockd._target.keepalive_window).
"""


def drift(ttl: float, clock_drift_factor: float, min_clock_drift: float) -> float:
    """The clock drift allowance of a lease of ``ttl``:
    ttl * clock_drift_factor + min_clock_drift."""
    return ttl * clock_drift_factor + min_clock_drift


def unary_valid_until(send: float, ttl: float, drift: float) -> float:
    """A unary lease granted (or renewed) for ``ttl`` by a request sent at
    ``send``: the server's lease began no earlier than the send, so the
    client trusts it until send + ttl - drift."""
    return send + ttl - drift


def session_break_valid_until(noticed: float, hang_bound: float, ttl: float,
                              drift: float) -> float:
    """A session lease whose stream broke (or was closed), noticed at
    ``noticed``: lockd was last known alive at noticed - hang_bound or later
    and renews every ttl/3, so the hold lasts at least until
    noticed - hang_bound + ttl*2/3, less the drift."""
    return noticed - hang_bound + ttl * 2 / 3 - drift


def session_safe(ttl: float, drift: float, hang_bound: float) -> bool:
    """Whether a lease of ``ttl`` may be held over a session: its hold must
    outlast the time a hang can go unnoticed, ttl*2/3 - drift > hang_bound.
    ttl 0 stands for the server's default ttl while it is not known yet
    (no session has been opened): safe until a session learns it."""
    return ttl == 0 or ttl * 2 / 3 - drift > hang_bound
