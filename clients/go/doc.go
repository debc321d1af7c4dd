// Package lockd is the Go client of lockd, a distributed lock service:
// leased, fenced locks over gRPC (the contract is docs/api.md of the
// lockd repository).
//
//	c, err := lockd.New(ctx, "lockd-0:7411,lockd-1:7411")
//	m := c.Mutex("orders/42")
//	if err := m.Lock(ctx); err != nil { ... }
//	defer m.Unlock(ctx)
//	charge(order, m.Token()) // the resource rejects smaller tokens
//
// A Client has one owner id and holds its locks over ONE Session stream
// (docs/api.md "Sessions"), opened by its first acquire: lockd renews every
// hold while the stream is up, and pushes `lost` when a hold is gone (a
// lease that ran out, an operator's ForceRelease), which closes that lock's
// Done channel. Holds that cannot go over the session (another owner, a
// lease other than the session's, or too short to outlast a hung replica:
// the table in path.go) use the unary RPCs, each renewed every ttl/3 by a
// goroutine of its own.
//
// Disconnects. When the stream breaks (lockd restarted or killed, the
// network lost), the Client reconnects with backoff, on any replica of the
// target, and opens a new session of the same owner that resumes every hold
// (by fencing token); a hold lockd does not give back is lost. Meanwhile a
// hold stays valid until break - K + 2/3 ttl - drift, K being the keepalive
// interval plus its timeout (gRPC-Go pings at most every 10 s) and drift =
// ttl*0.01 + 2 ms: it is never valid after lockd could have let it go. A
// unary hold stays valid until send + ttl - drift of its last renewal.
//
// No hold left behind: every acquire carries a request_id; when the client
// cannot learn an acquire's outcome (its context ended, the connection
// broke with the reply on its way), it undoes that attempt with
// Release{acquire_request_id} before it retries or returns (docs/api.md
// "Uncertain outcomes").
//
// Errors are *Error values with the gRPC code and lockd's ErrorInfo reason;
// compare with errors.Is against ErrLocked, ErrLeaseLost, ErrLockNotHeld,
// ErrLockKindMismatch, ErrUpgradeWouldBlock, ErrPermitsMismatch, or the
// context's errors.
//
// Package election builds leader election on a lock.
package lockd
