package io.lockd;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lockd.v1.AcquireRequest;
import io.lockd.v1.SessionAcquire;
import io.lockd.v1.SessionBatch;
import io.lockd.v1.SessionRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * BatchingWriter's rules, with a sink standing in for the stream: like grpc-java's call with an
 * on-ready threshold of one byte, it is not ready from a write until the test lets that write
 * leave ({@link #leave}).
 */
class BatchingWriterTest {
  private final List<SessionRequest> written = new ArrayList<>(); // guarded by itself
  private volatile boolean ready = true;
  private volatile boolean failWrites;
  private volatile CountDownLatch holdNextWrite; // a write waits inside the sink for this
  private final CountDownLatch inWrite = new CountDownLatch(1);
  private final CountDownLatch releaseHeldWrite = new CountDownLatch(1);
  private final BatchingWriter.Stats stats = new BatchingWriter.Stats();
  private final BatchingWriter writer = new BatchingWriter(this::write, () -> ready, stats);

  private void write(SessionRequest msg) {
    if (failWrites) {
      throw new IllegalStateException("stream broken");
    }
    synchronized (written) {
      written.add(msg);
    }
    ready = false;
    CountDownLatch hold = holdNextWrite;
    if (hold != null) {
      holdNextWrite = null;
      inWrite.countDown();
      try {
        hold.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The transport has written the last message: the stream is ready and says so. */
  private void leave() {
    ready = true;
    writer.onReady();
  }

  private static SessionRequest op(long id, int nameLength) {
    return SessionRequest.newBuilder().setAcquire(SessionAcquire.newBuilder().setOpId(id)
        .setRequest(AcquireRequest.newBuilder().setName("n".repeat(nameLength)))).build();
  }

  private static SessionRequest op(long id) {
    return op(id, 8);
  }

  /** A thread sending op 1, held inside the sink (in onNext) until releaseHeldWrite. */
  private Thread startHeldWriteOfOp1() throws InterruptedException {
    holdNextWrite = releaseHeldWrite;
    Thread first = new Thread(() -> writer.send(op(1)));
    first.start();
    assertTrue(inWrite.await(10, TimeUnit.SECONDS));
    return first;
  }

  @AfterEach
  void noWriterLeftHeld() {
    releaseHeldWrite.countDown();
  }

  private List<SessionRequest> written() {
    synchronized (written) {
      return List.copyOf(written);
    }
  }

  @Test
  void aLoneRequestIsWrittenAloneNotAsABatch() {
    writer.send(op(1));
    assertEquals(List.of(op(1)), written(), "at once");
    leave();
    writer.send(op(2));
    writer.send(op(3)); // while op 2 is in flight, but the only one then
    assertEquals(List.of(op(1), op(2)), written());
    leave();
    assertEquals(List.of(op(1), op(2), op(3)), written());
    assertEquals(3, stats.messages.get());
    assertEquals(0, stats.batches.get());
  }

  @Test
  void requestsSentWhileAWriteIsInFlightLeaveAsOneBatchInOrderOnceItHasLeft() {
    writer.send(op(1));
    writer.send(op(2));
    writer.send(op(3));
    writer.send(op(4));
    assertEquals(List.of(op(1)), written(), "nothing more until op 1 has left");
    leave();
    SessionRequest batch = SessionRequest.newBuilder()
        .setBatch(SessionBatch.newBuilder().addOps(op(2)).addOps(op(3)).addOps(op(4))).build();
    assertEquals(List.of(op(1), batch), written());
    leave();
    assertEquals(2, written().size(), "an empty queue writes nothing");
    assertEquals(2, stats.messages.get());
    assertEquals(1, stats.batches.get());
    assertEquals(3, stats.batchedOps.get());
  }

  @Test
  void aSenderWhileAnotherThreadIsWritingLeavesItsRequestToThatThread() throws Exception {
    Thread first = startHeldWriteOfOp1();
    ready = true; // op 1 has left the transport, but its writer is still in onNext
    writer.send(op(2)); // returns at once, unwritten
    writer.send(op(3));
    assertEquals(List.of(op(1)), written());
    releaseHeldWrite.countDown();
    first.join(); // the first writer looks again and takes both
    assertEquals(2, written().size());
    assertEquals(List.of(op(2), op(3)), written().get(1).getBatch().getOpsList());
  }

  @Test
  void aBatchStopsAtTheServersBoundOfOps() {
    writer.send(op(1));
    for (int i = 0; i < BatchingWriter.MAX_BATCH_OPS + 1; i++) {
      writer.send(op(2 + i));
    }
    leave();
    leave();
    List<SessionRequest> w = written();
    assertEquals(3, w.size());
    assertEquals(BatchingWriter.MAX_BATCH_OPS, w.get(1).getBatch().getOpsCount());
    assertEquals(op(2), w.get(1).getBatch().getOps(0));
    assertEquals(op(2 + BatchingWriter.MAX_BATCH_OPS), w.get(2)); // the rest, alone
  }

  @Test
  void aBatchStopsBeforeItsBytesPassTheBoundAndALargerOpGoesAlone() {
    int third = BatchingWriter.MAX_BATCH_BYTES / 3 - 64;
    writer.send(op(1));
    writer.send(op(2, third));
    writer.send(op(3, third));
    writer.send(op(4, third));
    writer.send(op(5, third)); // would pass the bound: the next write
    writer.send(op(6, BatchingWriter.MAX_BATCH_BYTES + 1)); // alone, however large
    writer.send(op(7));
    for (int i = 0; i < 4; i++) {
      leave();
    }
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
    failWrites = false;
    writer.send(op(2));
    leave();
    assertEquals(List.of(), written());
    assertEquals(0, stats.messages.get());
  }

  @Test
  void finishWaitsForTheWriteInProgressThenDropsWhatIsQueued() throws Exception {
    Thread first = startHeldWriteOfOp1();
    writer.send(op(2));
    List<Integer> writtenAtFinish = new ArrayList<>();
    Thread finisher = new Thread(() -> writer.finish(() -> writtenAtFinish.add(written().size())));
    finisher.start();
    finisher.join(200);
    assertTrue(finisher.isAlive(), "finish waits while op 1 is being written");
    releaseHeldWrite.countDown();
    first.join();
    finisher.join();
    leave();
    writer.send(op(3));
    assertEquals(List.of(op(1)), written());
    assertEquals(List.of(1), writtenAtFinish);
  }
}
