package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** LeaseValidity against clients/testdata/lease_validity.json, the vectors of every client. */
class LeaseValidityTest {
  @Test
  void unaryValidityIsSendPlusTtlMinusDrift() throws Exception {
    int n = 0;
    for (Value v : Vectors.read("lease_validity.json").getFieldsOrThrow("unary").getListValue()
        .getValuesList()) {
      Struct c = v.getStructValue();
      Duration ttl = ms(c, "ttl_ms");
      long until = LeaseValidity.unaryValidUntil(nanos(c, "send_ms"), ttl, drift(c, ttl));
      assertEquals(num(c, "valid_until_ms"), until / 1e6, 1e-6, c.toString());
      n++;
    }
    assertTrue(n >= 5);
  }

  @Test
  void sessionBreakValidityCountsFromTheLastTimeTheServerWasKnownAlive() throws Exception {
    int n = 0;
    for (Value v : Vectors.read("lease_validity.json").getFieldsOrThrow("session_break")
        .getListValue().getValuesList()) {
      Struct c = v.getStructValue();
      Duration ttl = ms(c, "ttl_ms");
      long until = LeaseValidity.sessionBreakValidUntil(nanos(c, "break_noticed_ms"),
          ms(c, "hang_bound_ms"), ttl, drift(c, ttl));
      assertEquals(num(c, "valid_until_ms"), until / 1e6, 1e-6, c.toString());
      n++;
    }
    assertTrue(n >= 4);
  }

  @Test
  void sessionSafeOnlyWhenTwoThirdsOfTheLeaseOutlastAHang() throws Exception {
    int n = 0;
    for (Value v : Vectors.read("lease_validity.json").getFieldsOrThrow("session_safe")
        .getListValue().getValuesList()) {
      Struct c = v.getStructValue();
      Duration ttl = ms(c, "ttl_ms");
      assertEquals(c.getFieldsOrThrow("session_safe").getBoolValue(),
          LeaseValidity.sessionSafe(ttl, drift(c, ttl), ms(c, "hang_bound_ms")), c.toString());
      n++;
    }
    assertTrue(n >= 6);
  }

  @Test
  void hangBoundUsesGrpcJavasShortestPingInterval() {
    assertEquals(Duration.ofSeconds(12),
        LeaseValidity.hangBound(Duration.ofSeconds(2), Duration.ofSeconds(2)));
    assertEquals(Duration.ofSeconds(33),
        LeaseValidity.hangBound(Duration.ofSeconds(30), Duration.ofSeconds(3)));
    assertFalse(LeaseValidity.sessionSafe(Duration.ofSeconds(18),
        LeaseValidity.drift(Duration.ofSeconds(18), 0.01, Duration.ofMillis(2)),
        LeaseValidity.hangBound(Duration.ofSeconds(10), Duration.ofSeconds(2))));
  }

  static double num(Struct c, String key) {
    return c.getFieldsOrThrow(key).getNumberValue();
  }

  static Duration ms(Struct c, String key) {
    return Duration.ofNanos(Math.round(num(c, key) * 1e6));
  }

  static long nanos(Struct c, String key) {
    return Math.round(num(c, key) * 1e6);
  }

  static Duration drift(Struct c, Duration ttl) {
    return LeaseValidity.drift(ttl, num(c, "clock_drift_factor"), ms(c, "min_clock_drift_ms"));
  }
}
