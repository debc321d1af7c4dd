package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.testing.LockdFixture;
import io.lockd.testing.LockdProcess;
import io.lockd.testing.StallProxy;
import io.lockd.v1.LockInfo;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Acquires whose reply is lost (docs/api.md "Uncertain outcomes"): a proxy between client and
 * lockd keeps lockd's reply back, so lockd granted and counts the reply as delivered, then cuts
 * the connection. The client must undo the attempt (Release{acquire_request_id}) before it
 * retries or fails, so that exactly one hold, or none, is left.
 */
class UncertainAcquireTest {
  @TempDir static Path dir;
  static LockdProcess lockd;
  static LockdClient observer;

  @BeforeAll
  static void start() throws Exception {
    lockd = new LockdProcess(dir).start();
    observer = LockdClient.builder().target(lockd.address()).build();
  }

  @AfterAll
  static void stop() throws Exception {
    observer.close();
    lockd.close();
  }

  @Test
  void unaryAcquireWhoseReplyIsLostIsUndoneAndRetriedToExactlyOneHold() throws Exception {
    acquireAcrossACut("lost-reply-unary", false);
  }

  @Test
  void sessionAcquireWhoseReplyIsLostIsUndoneAndRetriedToExactlyOneHold() throws Exception {
    acquireAcrossACut("lost-reply-session", true);
  }

  private void acquireAcrossACut(String name, boolean sessions) throws Exception {
    try (StallProxy proxy = new StallProxy(lockd.port());
        LockdClient client = LockdClient.builder().target(proxy.address())
            .useSessions(sessions).rpcTimeout(Duration.ofSeconds(8)).build()) {
      // Connect first (and open the session), so that only the acquire's reply is held back.
      LockdLock warm = client.getLock(name + "-warm");
      warm.lock();
      warm.unlock();
      proxy.holdReplies(true);
      LockdLock lock = client.getLock(name);
      CompletableFuture<Boolean> got = CompletableFuture.supplyAsync(() -> {
        try {
          return lock.tryLock(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          throw new IllegalStateException(e);
        }
      });
      // lockd grants at once; its reply is held back.
      assertTrue(LockdFixture.waitFor(() -> observer.describe(name).getHeld()));
      proxy.cut();
      proxy.holdReplies(false);
      assertTrue(got.get(15, TimeUnit.SECONDS));
      LockInfo info = observer.describe(name);
      assertEquals(client.clientId(), info.getOwner());
      assertEquals(1, info.getHoldCount(), info.toString());
    }
  }

  @Test
  void acquireThatGetsNoAnswerBeforeItsDeadlineIsUndoneOnLockd() throws Exception {
    String name = "no-answer";
    try (StallProxy proxy = new StallProxy(lockd.port());
        LockdClient client = LockdClient.builder().target(proxy.address()).useSessions(false)
            .rpcTimeout(Duration.ofMillis(1500)).releaseTimeout(Duration.ofMillis(1500))
            .build()) {
      assertTrue(LockdFixture.waitFor(() -> {
        try {
          return !client.describe("warm-up").getHeld();
        } catch (LockdException e) {
          return false; // still connecting through the proxy
        }
      }));
      proxy.holdReplies(true);
      LockdException e = assertThrows(LockdException.class,
          () -> client.acquire(LockSpec.exclusive(name), null, Duration.ZERO, Duration.ZERO,
              true));
      // The undo reached lockd but its answer was held back too: reported, with the id.
      assertNotNull(e.unconfirmedAcquireRequestId(), e.toString());
      assertFalse(observer.describe(name).getHeld(), "the undo gave the hold back");
      proxy.holdReplies(false);
    }
  }
}
