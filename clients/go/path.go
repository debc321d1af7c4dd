package lockd

import "time"

// The path an acquire takes: over the Client's session stream, or by unary
// RPCs (each hold then renewed by a goroutine of its own). The first row
// that holds decides (the C++ client's acquire_path.h has the same table):
//
//	condition                                  path     why
//	sessions turned off (WithoutSessions)      unary    asked for
//	owner other than the Client's              unary    a session holds for its own owner
//	                                                    (an election candidate)
//	no auto-renewal                            unary    a session renews every hold it has
//	lockd has no Session stream                unary    learnt from an UNIMPLEMENTED, kept
//	                                                    for the Client's life
//	ttl not session safe                       unary    the hold would not outlast a replica
//	                                                    that hangs (sessionSafe)
//	the session's lease not session safe       unary    the same, for the session's lease
//	ttl neither zero nor the session's lease   unary    one session has one lease
//	otherwise                                  session
//
// The last four rows are the session's accepts.
type path int

const (
	pathSession path = iota
	pathUnary
)

type pathInput struct {
	useSessions    bool
	ownerIsClients bool
	autoRenew      bool
	ttl            time.Duration
}

// sessionAcceptor is the session's side of the table.
type sessionAcceptor interface {
	accepts(ttl time.Duration) bool
}

func choosePath(in pathInput, s sessionAcceptor) path {
	if !in.useSessions || !in.ownerIsClients || !in.autoRenew {
		return pathUnary
	}
	if s.accepts(in.ttl) {
		return pathSession
	}
	return pathUnary
}
