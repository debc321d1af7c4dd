package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.v1.AcquireRequest;
import io.lockd.v1.SessionAcquire;
import io.lockd.v1.SessionRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** BatchingWriter's rules 1-5, with a sink standing in for the stream. */
class BatchingWriterTest {
  private final List<SessionRequest> written = new ArrayList<>(); // guarded by itself
  private final CountDownLatch firstWriteEntered = new CountDownLatch(1);
  private final CountDownLatch releaseFirstWrite = new CountDownLatch(1);
  private boolean holdFirstWrite;
  private boolean failWrites;
  private final BatchingWriter.Stats stats = new BatchingWriter.Stats();
  private final BatchingWriter writer = new BatchingWriter(this::write, stats);
  private Thread firstWriter;

  private void write(SessionRequest msg) {
    if (failWrites) {
      throw new IllegalStateException("stream broken");
    }
    synchronized (written) {
      written.add(msg);
    }
    if (holdFirstWrite && firstWriteEntered.getCount() > 0) {
      firstWriteEntered.countDown();
      try {
        releaseFirstWrite.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static SessionRequest op(long id, int nameLength) {
    return SessionRequest.newBuilder().setAcquire(SessionAcquire.newBuilder().setOpId(id)
        .setRequest(AcquireRequest.newBuilder().setName("n".repeat(nameLength)))).build();
  }

  private static SessionRequest op(long id) {
    return op(id, 8);
  }

  /** Op 1's write, made by another thread, is in flight when this returns. */
  private void startFirstWrite() throws InterruptedException {
    holdFirstWrite = true;
    firstWriter = new Thread(() -> writer.send(op(1)));
    firstWriter.start();
    assertTrue(firstWriteEntered.await(10, TimeUnit.SECONDS));
  }

  private void endFirstWrite() throws InterruptedException {
    releaseFirstWrite.countDown();
    firstWriter.join();
  }

  @AfterEach
  void noWriterLeft() throws InterruptedException {
    releaseFirstWrite.countDown();
    if (firstWriter != null) {
      firstWriter.join();
    }
  }

  private List<SessionRequest> written() {
    synchronized (written) {
      return List.copyOf(written);
    }
  }

  @Test
  void aLoneRequestIsWrittenAtOnceAloneNotAsABatch() {
    writer.send(op(1));
    assertEquals(List.of(op(1)), written());
    assertEquals(1, stats.messages.get());
    assertEquals(0, stats.batches.get());
  }

  @Test
  void requestsQueuedDuringAWriteLeaveAsOneBatchInOrderByTheFirstToFlush() throws Exception {
    startFirstWrite();
    long t2 = writer.queue(op(2));
    long t3 = writer.queue(op(3));
    long t4 = writer.queue(op(4));
    endFirstWrite();
    writer.flush(t3); // takes everything queued, not only up to its own
    writer.flush(t2); // left already: writes nothing
    writer.flush(t4);
    SessionRequest batch = written().get(1);
    assertEquals(List.of(op(2), op(3), op(4)), batch.getBatch().getOpsList());
    assertEquals(2, written().size());
    assertEquals(2, stats.messages.get());
    assertEquals(1, stats.batches.get());
    assertEquals(3, stats.batchedOps.get());
  }

  @Test
  void aLoneRequestQueuedDuringAWriteStillLeavesAlone() throws Exception {
    startFirstWrite();
    long t2 = writer.queue(op(2));
    endFirstWrite();
    writer.flush(t2);
    assertEquals(List.of(op(1), op(2)), written());
    assertEquals(0, stats.batches.get());
  }

  @Test
  void aBatchStopsAtTheServersBoundOfOps() throws Exception {
    startFirstWrite();
    long last = 0;
    for (int i = 0; i < BatchingWriter.MAX_BATCH_OPS + 1; i++) {
      last = writer.queue(op(2 + i));
    }
    endFirstWrite();
    writer.flush(last);
    List<SessionRequest> w = written();
    assertEquals(3, w.size());
    assertEquals(BatchingWriter.MAX_BATCH_OPS, w.get(1).getBatch().getOpsCount());
    assertEquals(op(2), w.get(1).getBatch().getOps(0));
    assertEquals(op(2 + BatchingWriter.MAX_BATCH_OPS), w.get(2)); // the rest, alone
  }

  @Test
  void aBatchStopsBeforeItsBytesPassTheBoundAndALargerOpGoesAlone() throws Exception {
    int third = BatchingWriter.MAX_BATCH_BYTES / 3 - 64;
    startFirstWrite();
    writer.queue(op(2, third));
    writer.queue(op(3, third));
    writer.queue(op(4, third));
    writer.queue(op(5, third)); // would pass the bound: the next write
    writer.queue(op(6, BatchingWriter.MAX_BATCH_BYTES + 1)); // alone, however large
    long last = writer.queue(op(7));
    endFirstWrite();
    writer.flush(last);
    List<SessionRequest> w = written();
    assertEquals(List.of(op(2, third), op(3, third), op(4, third)),
        w.get(1).getBatch().getOpsList());
    assertEquals(op(5, third), w.get(2));
    assertEquals(op(6, BatchingWriter.MAX_BATCH_BYTES + 1), w.get(3));
    assertEquals(op(7), w.get(4));
    assertEquals(5, w.size());
  }

  @Test
  void afterAFailedWriteEveryRequestIsDropped() {
    failWrites = true;
    writer.send(op(1));
    assertEquals(0, writer.queue(op(2)));
    writer.flush(0); // returns at once
    failWrites = false;
    writer.send(op(3));
    assertEquals(List.of(), written());
    assertEquals(0, stats.messages.get());
  }

  @Test
  void finishWaitsForTheWriteInFlightThenDropsWhatIsQueued() throws Exception {
    startFirstWrite();
    long t2 = writer.queue(op(2));
    List<String> order = new ArrayList<>();
    Thread finisher = new Thread(() -> writer.finish(() -> {
      synchronized (order) {
        order.add("finish after " + written().size() + " write(s)");
      }
    }));
    finisher.start();
    finisher.join(200); // blocked behind op 1's write
    assertTrue(finisher.isAlive());
    endFirstWrite();
    finisher.join();
    writer.flush(t2);
    assertEquals(List.of(op(1)), written());
    assertEquals(List.of("finish after 1 write(s)"), order);
    assertEquals(0, writer.queue(op(3)));
  }
}
