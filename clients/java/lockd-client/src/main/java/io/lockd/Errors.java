package io.lockd;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.Map;

/** The one translation of gRPC errors into {@link LockdException}. Stateless; thread-safe. */
final class Errors {
  private Errors() {}

  /** A failed unary call or stream; {@code context} names the operation and lock. */
  static LockdException fromThrowable(String context, Throwable t) {
    if (t instanceof LockdException) {
      return (LockdException) t;
    }
    Status status = Status.fromThrowable(t);
    com.google.rpc.Status details = StatusProto.fromThrowable(t);
    return build(context, status.getCode(), status.getDescription(), details, t);
  }

  /** A session operation's {@code result.status}. */
  static LockdException fromRpcStatus(String context, com.google.rpc.Status status) {
    return build(context, Status.fromCodeValue(status.getCode()).getCode(), status.getMessage(),
        status, null);
  }

  static LockdException of(Status.Code code, String message) {
    return new LockdException(code, message, null, null, null);
  }

  private static LockdException build(
      String context, Status.Code code, String message, com.google.rpc.Status details,
      Throwable cause) {
    String reason = null;
    Map<String, String> metadata = Map.of();
    if (details != null) {
      for (Any any : details.getDetailsList()) {
        if (any.is(ErrorInfo.class)) {
          try {
            ErrorInfo info = any.unpack(ErrorInfo.class);
            reason = info.getReason();
            metadata = info.getMetadataMap();
          } catch (InvalidProtocolBufferException e) {
            // A malformed detail: the code and message still say what happened.
          }
        }
      }
    }
    StringBuilder text = new StringBuilder(context).append(": ").append(code);
    if (message != null && !message.isEmpty()) {
      text.append(": ").append(message);
    }
    if (reason != null) {
      text.append(" (").append(reason);
      metadata.forEach((k, v) -> text.append(", ").append(k).append('=').append(v));
      text.append(')');
    }
    if ("LOCK_NOT_HELD".equals(reason)) {
      return new LockLostException(text.toString(), reason);
    }
    return new LockdException(code, text.toString(), reason, metadata, cause);
  }

  static String describe(String ns, String name) {
    return "\"" + name + "\" (namespace " + (ns.isEmpty() ? "default" : ns) + ")";
  }
}
