package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Struct;
import com.google.protobuf.Value;
import java.nio.file.Files;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * AcquirePath against clients/testdata/acquire_paths.json, the path rules of every client: each
 * row is a sequence of acquires by one fresh client, each checked against the path it takes.
 */
class AcquirePathTest {
  @Test
  void everyRowOfTheSharedTableChoosesTheSamePath() throws Exception {
    Assumptions.assumeTrue(Files.exists(Vectors.path("acquire_paths.json")),
        "clients/testdata/acquire_paths.json not in this tree yet");
    Struct table = Vectors.read("acquire_paths.json");
    Struct defaults = table.getFieldsOrThrow("client_defaults").getStructValue();
    int checked = 0;
    for (Value rowValue : table.getFieldsOrThrow("rows").getListValue().getValuesList()) {
      Struct row = rowValue.getStructValue();
      Map<String, Value> client = new HashMap<>(defaults.getFieldsMap());
      client.putAll(row.getFieldsOrThrow("client").getStructValue().getFieldsMap());
      boolean useSessions = client.get("use_sessions").getBoolValue();
      Duration k = Duration.ofMillis((long) (client.get("keepalive_time_ms").getNumberValue()
          + client.get("keepalive_timeout_ms").getNumberValue()));
      double factor = client.get("clock_drift_factor").getNumberValue();
      Duration minDrift = Duration.ofMillis((long) client.get("min_clock_drift_ms")
          .getNumberValue());
      AcquirePath.SessionLease session =
          new AcquirePath.SessionLease(Duration.ZERO, k, factor, minDrift);
      int i = 0;
      for (Value a : row.getFieldsOrThrow("acquires").getListValue().getValuesList()) {
        Struct acquire = a.getStructValue();
        Duration ttl = Duration.ofMillis((long) acquire.getFieldsOrThrow("ttl_ms")
            .getNumberValue());
        boolean otherOwner = flag(acquire, "other_owner", false);
        boolean autoRenew = flag(acquire, "auto_renew", true);
        AcquirePath path = AcquirePath.choose(useSessions, !otherOwner, autoRenew, session, ttl);
        assertEquals(acquire.getFieldsOrThrow("path").getStringValue(),
            path.name().toLowerCase(java.util.Locale.ROOT),
            row.getFieldsOrThrow("row").getStringValue() + ", acquire " + i);
        if (acquire.containsFields("then")) {
          Struct then = acquire.getFieldsOrThrow("then").getStructValue();
          switch (then.getFieldsOrThrow("event").getStringValue()) {
            case "no_session_stream" -> session.onUnimplemented();
            case "session_opened" -> session.onOpened(Duration.ofMillis(
                (long) then.getFieldsOrThrow("lease_ms").getNumberValue()));
            default -> throw new AssertionError("unknown event " + then);
          }
        }
        i++;
        checked++;
      }
    }
    assertTrue(checked >= 10, "only " + checked + " acquires checked");
  }

  private static boolean flag(Struct s, String key, boolean dflt) {
    return s.containsFields(key) ? s.getFieldsOrThrow(key).getBoolValue() : dflt;
  }
}
