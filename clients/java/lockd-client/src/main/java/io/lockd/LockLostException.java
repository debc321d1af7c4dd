package io.lockd;

import io.grpc.Status;
import java.util.Map;

/**
 * A lease is lost: the work done under it was not protected since (at least) the moment the
 * client learnt it. {@link #reason()} says why: {@code LEASE_EXPIRED}, {@code FORCE_RELEASED} or
 * {@code NOT_HELD} (pushed by the server over the session), {@code LOCK_NOT_HELD} (a renewal or
 * release found the hold gone), {@code NOT_RESUMED} (a new session did not get the hold back),
 * {@code VALIDITY_EXPIRED} (the client could not confirm the lease in time),
 * {@code FENCING_TOKEN_CHANGED}. Always FAILED_PRECONDITION.
 */
public final class LockLostException extends LockdException {
  private static final long serialVersionUID = 1L;

  LockLostException(String message, String reason) {
    super(Status.Code.FAILED_PRECONDITION, message, reason, Map.of(), null);
  }
}
