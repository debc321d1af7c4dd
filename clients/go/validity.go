package lockd

import "time"

// How long the client may trust a lease. Each bound is written once, here,
// and used by every call site (unary holds, renewals, the session stream,
// the path choice); validity_test.go checks them against
// clients/testdata/lease_validity.json, the vectors every client's tests
// read (the C++ client's lease_validity.h states the same rules):
//
//	drift          = ttl * clockDriftFactor + minClockDrift
//	hang bound (K) = max(keepalive time, 1 s) + keepalive timeout
//	unary          : valid until send + ttl - drift
//	session break  : valid until breakNoticed - K + ttl*2/3 - drift
//	session safe   : ttl*2/3 - drift > K, or ttl zero (not known yet)
//
// Why: a lease cannot have started before the request that granted or
// renewed it was sent, so `send` bounds the server's lease from below. A
// session stream to a replica that hangs breaks within K (keepalive pings),
// and the replica renewed each hold at most ttl/3 before it was last known
// alive, so a session hold stays safe until 2/3 of its lease minus the drift
// after breakNoticed - K; holding a lease over a session is only safe when
// that bound is later than the break itself.
//
// Pure functions; monotonic time.Time values (time.Now) throughout.

func drift(ttl time.Duration, factor float64, min time.Duration) time.Duration {
	return time.Duration(float64(ttl)*factor) + min
}

// keepaliveInterval is the ping interval a connection uses: at least 1 s
// (lockd refuses pings more often than every 500 ms).
func keepaliveInterval(t time.Duration) time.Duration {
	return max(t, time.Second)
}

func hangBound(keepaliveTime, keepaliveTimeout time.Duration) time.Duration {
	return keepaliveInterval(keepaliveTime) + keepaliveTimeout
}

func unaryValidUntil(send time.Time, ttl, drift time.Duration) time.Time {
	return send.Add(ttl - drift)
}

func sessionBreakValidUntil(breakNoticed time.Time, hang, ttl, drift time.Duration) time.Time {
	// The server was last known alive `hang` before the break was noticed.
	return breakNoticed.Add(-hang).Add(ttl*2/3 - drift)
}

func sessionSafe(ttl, drift, hang time.Duration) bool {
	return ttl == 0 || ttl*2/3-drift > hang
}
