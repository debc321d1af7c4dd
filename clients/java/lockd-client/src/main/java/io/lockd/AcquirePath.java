package io.lockd;

import java.time.Duration;

/**
 * The one choice of the path an acquire takes: over the client's session stream or by the unary
 * RPCs (with the client's watchdog renewing the hold). The same table as every lockd client
 * (clients/testdata/acquire_paths.json); the first row that holds decides:
 *
 * <pre>
 *   condition                                   path     why
 *   sessions turned off (Builder.useSessions)   unary    sessions turned off
 *   the call's owner is not the client's        unary    a session holds for its own owner
 *   autoRenew false                             unary    a session renews every hold it has
 *   lockd has no Session stream                 unary    learnt from an UNIMPLEMENTED, kept
 *                                                        for the client's life
 *   the call's ttl is not session-safe          unary    the hold would not outlast a replica
 *                                                        that hangs (LeaseValidity.sessionSafe)
 *   the session's lease is not session-safe     unary    the same, for the lease asked or
 *                                                        granted
 *   the call's ttl neither zero nor the         unary    one session has one lease: the
 *   session's lease (asked or granted)                   client's leaseTtl, else the ttl of the
 *                                                        first acquire that reached this row
 *   otherwise                                   session
 * </pre>
 *
 * The last four rows are {@link SessionLease#accepts}. Not thread-safe: the session stream calls
 * it under its lock.
 */
enum AcquirePath {
  SESSION,
  UNARY;

  static AcquirePath choose(
      boolean useSessions, boolean clientsOwner, boolean autoRenew, SessionLease session,
      Duration ttl) {
    if (!useSessions || !clientsOwner || !autoRenew) {
      return UNARY;
    }
    return session.accepts(ttl) ? SESSION : UNARY;
  }

  /** The session's lease, and whether lockd has the stream at all. */
  static final class SessionLease {
    private final Duration hangBound;
    private final double clockDriftFactor;
    private final Duration minClockDrift;
    private boolean unsupported;
    private boolean fixed;
    private Duration asked = Duration.ZERO; // zero: the server's default
    private Duration granted = Duration.ZERO; // zero: no stream opened yet

    /** {@code configured}: the client's leaseTtl, zero when it left it to the first acquire. */
    SessionLease(Duration configured, Duration hangBound, double factor, Duration minDrift) {
      this.hangBound = hangBound;
      this.clockDriftFactor = factor;
      this.minClockDrift = minDrift;
      if (!configured.isZero()) {
        fixed = true;
        asked = configured;
      }
    }

    boolean accepts(Duration ttl) {
      if (unsupported || !safe(ttl)) {
        return false;
      }
      if (!granted.isZero() && !safe(granted)) {
        return false;
      }
      if (!fixed) {
        fixed = true;
        asked = ttl;
        return true;
      }
      return ttl.isZero() || ttl.equals(asked) || ttl.equals(granted);
    }

    /** The lease to ask in {@code open.lease_ttl}; zero: the server's default. */
    Duration asked() {
      return asked;
    }

    /** The lease the server granted ({@code opened.lease_ttl}); zero before the first open. */
    Duration granted() {
      return granted;
    }

    void onOpened(Duration grantedTtl) {
      granted = grantedTtl;
    }

    /** The server has no Session RPC: every later acquire goes unary. */
    void onUnimplemented() {
      unsupported = true;
    }

    /** The server refused the lease asked: the next acquire fixes it again. */
    void onRefused(Duration configured) {
      fixed = !configured.isZero();
      asked = configured;
    }

    private boolean safe(Duration ttl) {
      return LeaseValidity.sessionSafe(
          ttl, LeaseValidity.drift(ttl, clockDriftFactor, minClockDrift), hangBound);
    }
  }
}
