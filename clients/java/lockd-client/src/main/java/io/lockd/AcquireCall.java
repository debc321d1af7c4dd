package io.lockd;

import io.lockd.v1.AcquireAllRequest;
import io.lockd.v1.AcquireRequest;
import io.lockd.v1.LockMode;
import java.time.Duration;
import java.util.List;

/**
 * One acquire as both paths take it: one lock, or with {@code all} 1-64 locks taken all or
 * nothing. Namespaces resolved (never empty). Immutable.
 *
 * @param waitEndNanos the server may wait until then
 * @param deadlineNanos past it a waiting attempt is given up
 * @param interruptible an interrupt of the calling thread ends the call (after its undo)
 */
record AcquireCall(
    List<LockSpec> locks,
    boolean all,
    String owner,
    Duration ttl,
    long waitEndNanos,
    long deadlineNanos,
    boolean autoRenew,
    boolean interruptible) {

  String describe() {
    if (!all) {
      return Errors.describe(locks.get(0).namespace(), locks.get(0).name());
    }
    StringBuilder out = new StringBuilder("locks ");
    for (LockSpec l : locks) {
      out.append(l == locks.get(0) ? "" : ", ").append(Errors.describe(l.namespace(), l.name()));
    }
    return out.toString();
  }

  /** The wait left at {@code now}, at least zero. */
  Duration waitLeft(long now) {
    return Duration.ofNanos(Math.max(0, waitEndNanos - now));
  }

  AcquireRequest request(String requestId, long now) {
    LockSpec l = locks.get(0);
    AcquireRequest.Builder b =
        AcquireRequest.newBuilder()
            .setNamespace(l.namespace())
            .setName(l.name())
            .setOwner(owner)
            .setRequestId(requestId)
            .setMode(mode(l))
            .setLimit(l.limit())
            .setPermits(l.permits())
            .setWaitTimeout(Protos.duration(waitLeft(now)));
    if (!ttl.isZero()) {
      b.setLeaseTtl(Protos.duration(ttl));
    }
    return b.build();
  }

  AcquireAllRequest requestAll(String requestId, long now) {
    AcquireAllRequest.Builder b =
        AcquireAllRequest.newBuilder()
            .setOwner(owner)
            .setRequestId(requestId)
            .setWaitTimeout(Protos.duration(waitLeft(now)));
    for (LockSpec l : locks) {
      b.addLocksBuilder()
          .setNamespace(l.namespace())
          .setName(l.name())
          .setMode(mode(l))
          .setLimit(l.limit())
          .setPermits(l.permits());
    }
    if (!ttl.isZero()) {
      b.setLeaseTtl(Protos.duration(ttl));
    }
    return b.build();
  }

  private static LockMode mode(LockSpec l) {
    return l.mode() == LockSpec.Mode.SHARED ? LockMode.LOCK_MODE_SHARED
        : LockMode.LOCK_MODE_EXCLUSIVE;
  }
}
