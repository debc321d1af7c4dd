"""lockd client errors: the exceptions lockd raises, and the one translation
of gRPC errors into them. Public names are re-exported by ``lockd``."""

from typing import Dict, Optional

import grpc

from lockd._proto.google.rpc import error_details_pb2, status_pb2
from lockd._values import LockInfo


class LockdError(Exception):
    """Any failure of a lockd call. ``code`` is the grpc.StatusCode (or None).

    ``unconfirmed_acquire_request_id``: set on an acquire() failure when the
    outcome of its last attempt was unknown and the undo of that attempt went
    unanswered: the attempt may have left a hold (ending with its lease), which
    ``client.undo_acquire(name, owner, that id)`` gives back. None otherwise.

    ``reason``: the reason lockd gave (its google.rpc.ErrorInfo), e.g.
    LOCK_KIND_MISMATCH (the name is held as another kind, or as a semaphore
    of another limit; ``metadata`` has ``kind`` and, for a semaphore,
    ``limit``), UPGRADE_WOULD_BLOCK (a shared holder asked exclusive while
    others hold or wait), PERMITS_MISMATCH (a semaphore holder asked again
    with other permits), LOCK_NOT_HELD; None when it gave none."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 reason: Optional[str] = None, metadata: Optional[Dict[str, str]] = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.metadata: Dict[str, str] = dict(metadata or {})
        self.unconfirmed_acquire_request_id: Optional[str] = None


class LockNotAcquired(LockdError):
    """The lock stayed held by another owner for the whole wait.

    ``holder`` is the LockInfo the server reported (or None)."""

    def __init__(self, message: str, holder: Optional[LockInfo] = None):
        super().__init__(message, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.holder = holder


class LockLost(LockdError):
    """The lock is not (or no longer) held: the server said LOCK_NOT_HELD, or the
    lease's validity ran out, or its fencing token changed. Work done under the
    lease may not have been protected.

    ``reason``: LOCK_NOT_HELD, VALIDITY_EXPIRED, FENCING_TOKEN_CHANGED; for
    session leases also what lockd's ``lost`` said (FORCE_RELEASED,
    LEASE_EXPIRED, NOT_HELD), SESSION_ENDED or CLIENT_CLOSED (the stream
    broke, or the Client was closed, and the session does not keep its holds:
    keep_on_disconnect=False)."""

    def __init__(self, message: str, reason: str = "LOCK_NOT_HELD"):
        super().__init__(message, grpc.StatusCode.FAILED_PRECONDITION, reason)


class Unavailable(LockdError):
    """lockd could not be reached, or did not answer in time."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE):
        super().__init__(message, code)


class Cancelled(LockdError):
    """The call was cancelled by its lockd.Cancellation (synchronous client):
    nothing of it is held, unless ``unconfirmed_acquire_request_id`` says
    otherwise."""

    def __init__(self, message: str):
        super().__init__(message, grpc.StatusCode.CANCELLED)


# Codes after which a call may have been applied although no answer said so.
# Every other code is the server's definite answer.
_OUTCOME_UNKNOWN = frozenset({
    grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED,
    grpc.StatusCode.DATA_LOSS,
})


def _describe(namespace: str, name: str) -> str:
    return '"%s" (namespace %s)' % (name, namespace or "default")


def _error_info(err: grpc.RpcError) -> Optional[error_details_pb2.ErrorInfo]:
    """The lockd ErrorInfo in the error's details, if any."""
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except Exception:  # malformed details: no reason
            return None
        for any_msg in status.details:
            info = error_details_pb2.ErrorInfo()
            if any_msg.Is(info.DESCRIPTOR) and any_msg.Unpack(info) and info.domain == "lockd":
                return info
    return None


def _translate(op: str, namespace: str, name: str, err: grpc.RpcError) -> LockdError:
    """The one place where gRPC errors become this module's exceptions."""
    return _translate_on(op, _describe(namespace, name), err)


def _translate_on(op: str, what: str, err: grpc.RpcError) -> LockdError:
    """_translate for an operation on ``what`` (one lock, or several)."""
    message = "lockd %s of %s: %s" % (op, what, err.details())
    info = _error_info(err)
    if info is not None and info.reason == "LOCK_NOT_HELD" \
            and err.code() == grpc.StatusCode.FAILED_PRECONDITION:
        return LockLost(message, "LOCK_NOT_HELD")
    if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(message, err.code())
    if info is None or not info.reason:
        return LockdError(message, err.code())
    metadata = dict(info.metadata)
    message += " [%s]" % " ".join([info.reason] + ["%s=%s" % kv for kv in sorted(metadata.items())])
    return LockdError(message, err.code(), info.reason, metadata)
