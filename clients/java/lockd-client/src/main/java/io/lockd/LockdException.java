package io.lockd;

import io.grpc.Status;
import java.util.Map;

/**
 * A failed lockd call: the gRPC status code, and the reason lockd gave in its
 * {@code google.rpc.ErrorInfo} (docs/api.md "Errors"), e.g. {@code LOCK_KIND_MISMATCH},
 * {@code UPGRADE_WOULD_BLOCK}, {@code PERMITS_MISMATCH}, {@code LOCK_NOT_HELD}, with its
 * metadata. Unchecked, like the exceptions of {@code java.util.concurrent.locks}.
 */
public class LockdException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final String reason;
  private final Map<String, String> metadata;
  private final String unconfirmedAcquireRequestId;

  public LockdException(
      Status.Code code, String message, String reason, Map<String, String> metadata,
      Throwable cause) {
    this(code, message, reason, metadata, null, cause);
  }

  LockdException(
      Status.Code code,
      String message,
      String reason,
      Map<String, String> metadata,
      String unconfirmedAcquireRequestId,
      Throwable cause) {
    super(message, cause);
    this.code = code;
    this.reason = reason;
    this.metadata = metadata == null ? Map.of() : Map.copyOf(metadata);
    this.unconfirmedAcquireRequestId = unconfirmedAcquireRequestId;
  }

  /** The gRPC status code (UNAVAILABLE, FAILED_PRECONDITION, INVALID_ARGUMENT, ...). */
  public Status.Code code() {
    return code;
  }

  /** lockd's ErrorInfo reason, or null when the status carried none. */
  public String reason() {
    return reason;
  }

  /** The ErrorInfo metadata (e.g. {@code kind} and {@code limit} of LOCK_KIND_MISMATCH). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /**
   * For an acquire whose last attempt's outcome the client did not learn and whose undo went
   * unanswered: that attempt's request_id (the attempt may have left a hold, which ends with its
   * lease, or now with {@link LockdClient#undoAcquire}). Null otherwise.
   */
  public String unconfirmedAcquireRequestId() {
    return unconfirmedAcquireRequestId;
  }

  LockdException withUnconfirmedAcquire(String requestId) {
    return new LockdException(
        code,
        getMessage() + " (the undo of acquire request_id " + requestId + " went unanswered)",
        reason,
        metadata,
        requestId,
        this);
  }
}
