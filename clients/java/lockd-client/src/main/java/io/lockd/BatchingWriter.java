package io.lockd;

import io.lockd.v1.SessionBatch;
import io.lockd.v1.SessionRequest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The write side of one Session stream, shared by all the threads of a {@link LockdClient}
 * (docs/api.md "Batches on a Session"). Rules:
 *
 * <ol>
 *   <li>A write is in flight from {@code onNext} until the transport has written it to the
 *       connection: the stream's call is made with an on-ready threshold of one byte, so
 *       {@code isReady()} is false until then, and gRPC calls the stream's on-ready handler
 *       ({@link #onReady}) when it turns true. One message is written at a time.
 *   <li>A request sent while no write is in flight is written at once, alone (a plain
 *       SessionRequest, never a one-op batch), by the thread that sent it: nothing waits on a
 *       timer, so a lone op pays no latency.
 *   <li>Requests sent while a write is in flight are written, once it has left, as ONE
 *       SessionBatch in the order they were sent, by the first thread that finds the stream ready
 *       (the on-ready handler or a sender): at most {@link #MAX_BATCH_OPS} ops and, unless one op
 *       alone is larger, {@link #MAX_BATCH_BYTES}; the rest go in the writes after.
 *   <li>Never blocks a sender on a write: {@link #send} queues, writes if nobody else may, and
 *       returns. No thread of its own.
 *   <li>After a write fails, or once {@link #finish} ran, every request sent then or later is
 *       dropped: the stream's reader sees its end and settles the operations.
 * </ol>
 *
 * <p>Why the transport's readiness: grpc-java's {@code onNext} only hands the message to the
 * transport's event loop, in microseconds, so "while another thread is inside onNext" would rarely
 * catch anything; the time until the event loop has written it is what the ops behind it wait
 * anyway, and under load they fill a batch meanwhile.
 *
 * <p>The caller writes {@code open} itself before it sends anything, so {@code open} is never in a
 * batch.
 *
 * <p>Thread-safe: the queue and the writing flag behind {@code mu}; one thread writes at a time
 * (the one that set {@code writing}), outside {@code mu}. A caller may not hold its own lock
 * while calling {@link #send}, {@link #onReady} or {@link #finish} (they write); it may while
 * calling {@link #queue} (SessionStream does, to queue in op_id order), then {@link #drain}
 * after letting it go.
 */
final class BatchingWriter {
  /** The server's bound on a SessionBatch (more is a protocol error). */
  static final int MAX_BATCH_OPS = 1000;

  /**
   * A batch stops growing before its ops pass this many bytes, well inside gRPC's default 4 MiB
   * receive limit of the server.
   */
  static final int MAX_BATCH_BYTES = 1 << 20;

  /** What a client's writers wrote, summed over its streams (for tests and tuning). */
  static final class Stats {
    /** Messages written (plain requests and batches; not {@code open}). */
    final AtomicLong messages = new AtomicLong();

    /** Of {@link #messages}, the batches. */
    final AtomicLong batches = new AtomicLong();

    /** Ops written in batches. */
    final AtomicLong batchedOps = new AtomicLong();
  }

  private record Queued(SessionRequest request, int bytes) {}

  private final Consumer<SessionRequest> write;
  private final BooleanSupplier ready;
  private final Stats stats;
  private final Object mu = new Object();
  private final ArrayDeque<Queued> queued = new ArrayDeque<>(); // guarded by mu
  private boolean writing; // a thread is writing; guarded by mu
  private boolean failed; // guarded by mu

  /**
   * @param write writes one message on the stream without blocking (grpc-java's {@code onNext});
   *     a RuntimeException means the stream is broken
   * @param ready whether the stream's previous write has left (grpc-java's {@code isReady()})
   * @param stats where the writes are counted
   */
  BatchingWriter(Consumer<SessionRequest> write, BooleanSupplier ready, Stats stats) {
    this.write = write;
    this.ready = ready;
    this.stats = stats;
  }

  /** {@link #queue}, then {@link #drain}. */
  void send(SessionRequest request) {
    queue(request);
    drain();
  }

  /**
   * Queues {@code request} (acquire, release, cancel or acquire_all) without writing it; the
   * caller calls {@link #drain} next. Dropped when the stream has failed or finished.
   */
  void queue(SessionRequest request) {
    int bytes = request.getSerializedSize();
    synchronized (mu) {
      if (!failed) {
        queued.add(new Queued(request, bytes));
      }
    }
  }

  /**
   * Writes what is queued, one message per ready stream, unless another thread is writing (it
   * looks again when done) or the stream is not ready ({@link #onReady} will). Never waits.
   */
  void drain() {
    while (true) {
      List<SessionRequest> next;
      synchronized (mu) {
        if (writing || failed || queued.isEmpty() || !ready.getAsBoolean()) {
          return;
        }
        writing = true;
        next = takeNext();
      }
      SessionRequest msg = next.get(0);
      if (next.size() > 1) {
        msg = SessionRequest.newBuilder()
            .setBatch(SessionBatch.newBuilder().addAllOps(next)).build();
      }
      boolean ok = true;
      try {
        write.accept(msg);
      } catch (RuntimeException e) {
        ok = false;
      }
      synchronized (mu) {
        writing = false;
        mu.notifyAll(); // finish() may wait for this write
        if (!ok) {
          failed = true;
          queued.clear();
          return;
        }
      }
      stats.messages.incrementAndGet();
      if (next.size() > 1) {
        stats.batches.incrementAndGet();
        stats.batchedOps.addAndGet(next.size());
      }
    }
  }

  /** The stream's on-ready handler: its previous write has left. */
  void onReady() {
    drain();
  }

  /**
   * Drops every request queued and to come (rule 5), waits for a write in progress, then runs
   * {@code last} (a half-close or a cancel of the call), so that it never races a write.
   */
  void finish(Runnable last) {
    synchronized (mu) {
      failed = true;
      queued.clear();
      boolean interrupted = false;
      while (writing) {
        try {
          mu.wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
    last.run();
  }

  /** The next write's requests, taken from the head of the queue. */
  private List<SessionRequest> takeNext() {
    List<SessionRequest> next = new ArrayList<>(Math.min(queued.size(), MAX_BATCH_OPS));
    long bytes = 0;
    while (!queued.isEmpty() && next.size() < MAX_BATCH_OPS
        && (next.isEmpty() || bytes + queued.peekFirst().bytes() <= MAX_BATCH_BYTES)) {
      Queued q = queued.pollFirst();
      bytes += q.bytes();
      next.add(q.request());
    }
    return next;
  }
}
