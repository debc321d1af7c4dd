package io.lockd;

import io.lockd.v1.SessionBatch;
import io.lockd.v1.SessionRequest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * The write side of one Session stream, shared by all the threads of a {@link LockdClient}
 * (docs/api.md "Batches on a Session"). Rules:
 *
 * <ol>
 *   <li>One message is written at a time (a gRPC call's sends must not race), by a caller's own
 *       thread; no thread of its own, no timer.
 *   <li>A request queued while no write is in progress is written at once, alone (a plain
 *       SessionRequest, never a one-op batch), by the thread that queued it: a lone op pays no
 *       latency.
 *   <li>Requests queued while a write is in progress are written, when it returns, as ONE
 *       SessionBatch in the order they were queued, by the first of their callers to get the
 *       writer's turn: at most {@link #MAX_BATCH_OPS} ops and, unless one op alone is larger,
 *       {@link #MAX_BATCH_BYTES}; the rest go in the writes after.
 *   <li>Each caller writes until its own request has left, not longer: a caller whose request
 *       left in another's batch returns without writing, so no caller keeps writing for the
 *       others under steady load.
 *   <li>After a write fails, or once {@link #finish} ran, every request queued then or later is
 *       dropped: the stream's reader sees its end and settles the operations.
 * </ol>
 *
 * <p>When to coalesce: with grpc-java, {@code onNext} serializes the message and hands it to the
 * transport without blocking (it buffers, and the call stays ready until about 32 KiB are
 * unsent, several hundred ops), so "a write in progress" is a caller inside the write function,
 * i.e. inside {@code onNext}. Under load several threads queue while one is there, and they
 * leave together; an idle client's op never waits. Flow control (isReady) is not used: a
 * Session's messages are small and lockd reads them at once.
 *
 * <p>The caller writes {@code open} itself before it queues anything, so {@code open} is never in
 * a batch.
 *
 * <p>Thread-safe: the queue behind {@code mu}, writes behind {@code turn}. Lock order: turn, then
 * mu; a caller may hold its own lock while calling {@link #queue} (SessionStream does, to queue
 * in op_id order), never while calling {@link #flush} or {@link #finish}.
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
  private final Stats stats;
  private final ReentrantLock turn = new ReentrantLock(); // held for a write
  private final Object mu = new Object();
  private final ArrayDeque<Queued> queued = new ArrayDeque<>(); // guarded by mu
  private long lastQueued; // tickets are 1, 2, ...; guarded by mu
  private long taken; // tickets taken for a write; guarded by mu
  private boolean failed; // guarded by mu

  /**
   * @param write writes one message on the stream without blocking (grpc-java's {@code onNext});
   *     a RuntimeException means the stream is broken
   * @param stats where the writes are counted
   */
  BatchingWriter(Consumer<SessionRequest> write, Stats stats) {
    this.write = write;
    this.stats = stats;
  }

  /**
   * Queues {@code request} (acquire, release, cancel or acquire_all) and returns its ticket for
   * {@link #flush}; 0 when the stream has failed or finished (dropped). Never blocks on a write.
   */
  long queue(SessionRequest request) {
    int bytes = request.getSerializedSize();
    synchronized (mu) {
      if (failed) {
        return 0;
      }
      queued.add(new Queued(request, bytes));
      return ++lastQueued;
    }
  }

  /**
   * Returns once the request of {@code ticket} (and everything queued before it) has been
   * written, by this thread or an earlier writer (rules 2-4), or dropped (rule 5). Blocks while
   * another caller is writing. Does nothing for ticket 0.
   */
  void flush(long ticket) {
    if (ticket == 0) {
      return;
    }
    turn.lock();
    try {
      while (true) {
        List<SessionRequest> next;
        synchronized (mu) {
          if (failed || taken >= ticket) {
            return; // written (or dropped)
          }
          next = takeNext();
        }
        SessionRequest msg = next.get(0);
        if (next.size() > 1) {
          msg = SessionRequest.newBuilder()
              .setBatch(SessionBatch.newBuilder().addAllOps(next)).build();
        }
        try {
          write.accept(msg);
        } catch (RuntimeException e) {
          drop();
          return;
        }
        stats.messages.incrementAndGet();
        if (next.size() > 1) {
          stats.batches.incrementAndGet();
          stats.batchedOps.addAndGet(next.size());
        }
      }
    } finally {
      turn.unlock();
    }
  }

  /** {@code flush(queue(request))}. */
  void send(SessionRequest request) {
    flush(queue(request));
  }

  /**
   * Drops every request queued and to come (rule 5), then runs {@code last} (a half-close or a
   * cancel of the call) in the writer's turn, so that it never races a write.
   */
  void finish(Runnable last) {
    turn.lock();
    try {
      drop();
      last.run();
    } finally {
      turn.unlock();
    }
  }

  private void drop() {
    synchronized (mu) {
      failed = true;
      queued.clear();
    }
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
    taken += next.size();
    return next;
  }
}
