package lockd

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is every error of this package that lockd (or the client on its
// behalf) reports: the gRPC code, lockd's ErrorInfo reason when there is one
// (docs/api.md "Errors"), and a message naming the operation and the lock.
// Compare with errors.Is against the sentinels below; status.Code(err) gives
// the code (Error has GRPCStatus).
type Error struct {
	Code codes.Code
	// Reason is lockd's google.rpc.ErrorInfo reason ("LOCK_NOT_HELD",
	// "LOCK_KIND_MISMATCH", ...), or the client's reason for a lost lease
	// ("LEASE_EXPIRED", "VALIDITY_EXPIRED", ...); empty when none.
	Reason string
	// Metadata of the ErrorInfo (for LOCK_KIND_MISMATCH: kind, limit).
	Metadata map[string]string
	// Lost is true when a hold this client had is gone (ErrLeaseLost).
	Lost bool
	// UnconfirmedRequestID is set on a failed acquire whose outcome the
	// client did not learn and whose undo went unanswered: the request_id of
	// that attempt, which may have left a hold until its lease ends (undo it
	// with Client.UndoAcquire). Empty otherwise.
	UnconfirmedRequestID string
	// Holder is the lock's holder when an acquire was not granted and lockd
	// said who holds it (ErrLocked); nil otherwise.
	Holder *LockInfo
	Msg    string
	cause  error // a context's error, for errors.Is
}

// Unwrap gives the context error of a call that ended with its context.
func (e *Error) Unwrap() error { return e.cause }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("lockd: ")
	b.WriteString(e.Msg)
	if e.Reason != "" {
		b.WriteString(" [")
		b.WriteString(e.Reason)
		keys := make([]string, 0, len(e.Metadata))
		for k := range e.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%s", k, e.Metadata[k])
		}
		b.WriteString("]")
	}
	fmt.Fprintf(&b, " (%s)", e.Code)
	return b.String()
}

// GRPCStatus lets status.Code and status.FromError see the code.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Error()) }

// Is matches a sentinel: one with a Reason matches that reason; ErrLeaseLost
// matches every lost hold and LOCK_NOT_HELD; ErrLocked every acquire not
// granted in time.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	switch t {
	case ErrLeaseLost:
		return e.Lost || e.Reason == reasonLockNotHeld
	case ErrLocked:
		return e.Reason == reasonNotAcquired
	}
	return t.Reason != "" && t.Reason == e.Reason
}

const (
	reasonLockNotHeld = "LOCK_NOT_HELD"
	reasonNotAcquired = "NOT_ACQUIRED" // client side: not granted within the wait
)

// Sentinels for errors.Is. Each is a *Error with only Reason set.
var (
	// ErrLocked: TryLock (or an acquire whose wait ran out) found the lock
	// held by another owner; Error.Holder says by whom. Code
	// DEADLINE_EXCEEDED; no hold was taken.
	ErrLocked = &Error{Code: codes.DeadlineExceeded, Reason: reasonNotAcquired, Msg: "not acquired: held by another owner"}
	// ErrLeaseLost: a hold ended without the client releasing it (lease
	// expired, force-released, not resumed after a reconnect, validity ran
	// out), or lockd answered LOCK_NOT_HELD.
	ErrLeaseLost = &Error{Code: codes.FailedPrecondition, Reason: "LEASE_LOST", Msg: "lease lost"}
	// ErrLockNotHeld: lockd's LOCK_NOT_HELD (also matched by ErrLeaseLost).
	ErrLockNotHeld = &Error{Code: codes.FailedPrecondition, Reason: reasonLockNotHeld, Msg: "lock not held"}
	// ErrLockKindMismatch: the name is held as another kind (lock vs
	// semaphore, or a semaphore of another limit).
	ErrLockKindMismatch = &Error{Code: codes.FailedPrecondition, Reason: "LOCK_KIND_MISMATCH", Msg: "lock kind mismatch"}
	// ErrUpgradeWouldBlock: a SHARED holder asked EXCLUSIVE while others hold or wait.
	ErrUpgradeWouldBlock = &Error{Code: codes.FailedPrecondition, Reason: "UPGRADE_WOULD_BLOCK", Msg: "upgrade would block"}
	// ErrPermitsMismatch: a semaphore holder asked again with other permits.
	ErrPermitsMismatch = &Error{Code: codes.FailedPrecondition, Reason: "PERMITS_MISMATCH", Msg: "permits mismatch"}
	// ErrFencingTokenMismatch: ForceRelease named another holder's token.
	ErrFencingTokenMismatch = &Error{Code: codes.FailedPrecondition, Reason: "FENCING_TOKEN_MISMATCH", Msg: "fencing token mismatch"}
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("lockd: client is closed")

// fromStatus is the one place where a gRPC status becomes an *Error: `op`
// on `what` (describeLock) failed with `s`. A context error stays itself
// wrapped, so errors.Is(err, context.Canceled) works.
func fromStatus(op, what string, s *status.Status) *Error {
	e := &Error{Code: s.Code(), Msg: fmt.Sprintf("%s of %s: %s", op, what, s.Message())}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "lockd" {
			e.Reason = info.GetReason()
			e.Metadata = info.GetMetadata()
		}
	}
	return e
}

// fromErr: fromStatus for any error a gRPC call returned.
func fromErr(op, what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrClosed) {
		return err
	}
	if _, ok := err.(*Error); ok {
		return err
	}
	return fromStatus(op, what, status.Convert(err))
}

// lostError is the error of a hold of `what` lost for `reason`.
func lostError(what, reason, why string) *Error {
	return &Error{Code: codes.FailedPrecondition, Reason: reason, Lost: true,
		Msg: fmt.Sprintf("lease of %s lost: %s", what, why)}
}

func describeLock(ns, name string) string {
	if ns == "" {
		ns = "default"
	}
	return fmt.Sprintf("%q (namespace %s)", name, ns)
}
