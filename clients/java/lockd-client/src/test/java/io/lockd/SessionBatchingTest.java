package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.testing.LockdProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Batches on the one Session stream of a client (docs/api.md "Batches on a Session") against a
 * real lockd (memory backend), observed through the client's write and read counters.
 */
class SessionBatchingTest {
  @TempDir static Path dir;
  static LockdProcess lockd;

  @BeforeAll
  static void start() throws Exception {
    lockd = new LockdProcess(dir).start();
  }

  @AfterAll
  static void stop() {
    lockd.close();
  }

  private static LockdClient newClient() {
    return LockdClient.builder().target(lockd.address()).build();
  }

  private static Lease acquire(LockdClient c, String name, Duration wait)
      throws InterruptedException {
    return c.acquire(LockSpec.exclusive(name), null, Duration.ZERO, wait, true);
  }

  @Test
  void aLoneOpIsWrittenAloneAndAnsweredAlone() throws Exception {
    try (LockdClient c = newClient()) {
      acquire(c, "lone-open", Duration.ZERO).release(); // opens the stream
      BatchingWriter.Stats w = c.session.writeStats;
      long messages = w.messages.get();
      Lease l = acquire(c, "lone", Duration.ZERO);
      assertNotNull(l);
      l.release();
      assertEquals(messages + 2, w.messages.get(), "one message per op");
      assertEquals(0, w.batches.get(), "no op of a client doing one at a time waits for another");
      assertEquals(0, c.session.responseBatches.get(), "lockd batches only for a batching client");
    }
  }

  /**
   * 32 threads of one client, each alternating an acquire of its own free lock (granted, with a
   * token larger than its last) and a try of a lock another client holds (refused), then a
   * release: a result routed to the wrong op shows as a refusal of a free lock, a grant of a held
   * one, a token out of order or a release of a lock not held.
   */
  @Test
  void manyThreadsShareTheStreamTheirOpsLeaveInBatchesAndResultsReachTheirOps() throws Exception {
    int threads = 32;
    int rounds = 60;
    try (LockdClient c = newClient(); LockdClient holder = newClient()) {
      Lease held = acquire(holder, "batch-held", Duration.ZERO);
      assertNotNull(held);
      acquire(c, "batch-open", Duration.ZERO).release(); // opens the stream
      List<Throwable> failures = new CopyOnWriteArrayList<>();
      CountDownLatch go = new CountDownLatch(1);
      List<Thread> ts = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        String mine = "batch-own-" + t;
        Thread th = new Thread(() -> {
          try {
            go.await();
            long lastToken = 0;
            for (int i = 0; i < rounds; i++) {
              Lease l = acquire(c, mine, Duration.ofSeconds(5));
              if (l == null || !l.name().equals(mine) || l.fencingToken() <= lastToken) {
                throw new AssertionError(mine + " round " + i + ": got " + l + " after token "
                    + lastToken);
              }
              lastToken = l.fencingToken();
              Lease other = acquire(c, "batch-held", Duration.ZERO);
              if (other != null) {
                throw new AssertionError(mine + " round " + i + ": granted a held lock " + other);
              }
              l.release();
            }
          } catch (Throwable e) {
            failures.add(e);
          }
        });
        ts.add(th);
        th.start();
      }
      go.countDown();
      for (Thread th : ts) {
        th.join();
      }
      held.release();
      assertEquals(List.of(), failures);
      BatchingWriter.Stats w = c.session.writeStats;
      System.out.printf("SessionBatchingTest: %d ops in %d messages, %d batches of %d ops;"
              + " %d response batches of %d results%n", 2 + 3L * threads * rounds,
          w.messages.get(), w.batches.get(), w.batchedOps.get(),
          c.session.responseBatches.get(), c.session.responseBatchItems.get());
      assertTrue(w.batches.get() > 0, "ops queued during a write left in a batch");
      assertTrue(w.batchedOps.get() > w.batches.get(), "a batch carries more than one op");
      assertTrue(w.messages.get() < 2 + 3L * threads * rounds, "fewer messages than ops");
      assertTrue(c.session.responseBatches.get() > 0, "lockd answered in batches");
      assertTrue(c.session.responseBatchItems.get() > c.session.responseBatches.get(),
          "a response batch carries more than one result");
    }
  }
}
