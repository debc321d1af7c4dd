package io.lockd;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.lockd.v1.AcquireResponse;
import io.lockd.v1.LockInfo;
import io.lockd.v1.LockLost;
import io.lockd.v1.LockRef;
import io.lockd.v1.LockServiceGrpc;
import io.lockd.v1.ReleaseRequest;
import io.lockd.v1.SessionAcquire;
import io.lockd.v1.SessionAcquireAll;
import io.lockd.v1.SessionCancel;
import io.lockd.v1.SessionOpen;
import io.lockd.v1.SessionOpened;
import io.lockd.v1.SessionRelease;
import io.lockd.v1.SessionRequest;
import io.lockd.v1.SessionResponse;
import io.lockd.v1.SessionResult;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The one Session stream of a {@link LockdClient} (docs/api.md "Sessions"), over which its holds
 * are taken, renewed by the server and released.
 *
 * <p>Lifecycle: opened by the first acquire that takes this path, with open.owner = the client's
 * owner, open.lease_ttl = the session's lease ({@link AcquirePath.SessionLease}) and
 * open.keep_on_disconnect = the client's setting. gRPC's threads deliver the stream's messages:
 * each {@code result} completes its op by op_id, each {@code lost} marks its lease lost. When the
 * stream breaks it is reopened with capped, jittered backoff while the session has holds or
 * operations, as a session of the same owner with {@code resume} = every hold still held; a hold
 * the server does not list in {@code opened.resumed} is lost. While no stream is up a hold stays
 * valid until its session-break bound ({@link LeaseValidity#sessionBreakValidUntil}), then is
 * lost. With no holds and no operations a broken stream is reopened by the next acquire.
 *
 * <p>Operations in flight when the stream breaks have an unknown outcome: an acquire is undone
 * with the unary Release{acquire_request_id} and retried by its caller; a release is repeated as
 * a unary Release with its request_id. Operations issued while no stream is up wait for the next
 * one (an acquire up to its deadline); a release then goes unary at once (the hold belongs to the
 * owner, not to the stream). An acquire its caller gives up (deadline, interrupt) is cancelled on
 * the stream; a grant that raced the cancel is given back.
 *
 * <p>Writes go through the stream's {@link BatchingWriter}: an op is queued under {@code mu}
 * (so ops leave in op_id order) and written outside it, by its caller's thread when the stream's
 * previous write has left, else with the ops queued meanwhile as one {@code batch} once it has.
 * The reader takes each item of a response {@code batch} as if it had come alone.
 *
 * <p>Thread-safe: every field below {@code mu} is guarded by it; the writer orders the stream's
 * sends (a gRPC stream's sends must not race). Lost listeners run on the client's callback
 * executor.
 */
final class SessionStream {
  /** The outcome of an op whose stream broke after it was sent: unknown. */
  static final class StreamBroken extends Exception {
    private static final long serialVersionUID = 1L;

    StreamBroken(String why) {
      super(why, null, false, false);
    }
  }

  /** The server has no Session RPC: use the unary path. */
  static final class Unsupported extends Exception {
    private static final long serialVersionUID = 1L;

    Unsupported() {
      super("lockd has no Session stream", null, false, false);
    }
  }

  private static final class Op {
    final long id;
    final SessionRequest request;
    final AcquireCall acquire; // null for a release
    final CompletableFuture<Object> done = new CompletableFuture<>();
    boolean sent; // queued on a stream's writer
    volatile BatchingWriter writer; // set under mu when queued; drained outside it
    boolean abandoned;

    Op(long id, SessionRequest request, AcquireCall acquire) {
      this.id = id;
      this.request = request;
      this.acquire = acquire;
    }
  }

  private final class Stream implements ClientResponseObserver<SessionRequest, SessionResponse> {
    ClientCallStreamObserver<SessionRequest> out;
    final BatchingWriter writer =
        new BatchingWriter(m -> out.onNext(m), () -> out.isReady(), writeStats);
    boolean opened;

    @Override
    public void beforeStart(ClientCallStreamObserver<SessionRequest> requestStream) {
      out = requestStream;
      out.setOnReadyHandler(writer::onReady);
    }

    @Override
    public void onNext(SessionResponse response) {
      switch (response.getKindCase()) {
        case OPENED -> onOpened(this, response.getOpened());
        case RESULT -> onResult(this, response.getResult());
        case LOST -> onLost(response.getLost());
        case BATCH -> {
          responseBatches.incrementAndGet();
          responseBatchItems.addAndGet(response.getBatch().getItemsCount());
          for (SessionResponse item : response.getBatch().getItemsList()) {
            switch (item.getKindCase()) {
              case RESULT -> onResult(this, item.getResult());
              case LOST -> onLost(item.getLost());
              default -> {} // only results and losts come in a batch
            }
          }
        }
        default -> {}
      }
    }

    @Override
    public void onError(Throwable t) {
      onEnd(this, Status.fromThrowable(t));
    }

    @Override
    public void onCompleted() {
      onEnd(this, Status.OK);
    }
  }

  private final LockdClient client;
  /** What this client's writers wrote (for tests and tuning). */
  final BatchingWriter.Stats writeStats = new BatchingWriter.Stats();
  /** Response batches read, and the items they carried (for tests and tuning). */
  final AtomicLong responseBatches = new AtomicLong();
  final AtomicLong responseBatchItems = new AtomicLong();
  private final Object mu = new Object();
  private final AcquirePath.SessionLease lease; // guarded by mu
  private Stream stream; // the stream being opened or open; guarded by mu
  private boolean closed; // guarded by mu
  private final Map<Long, Op> ops = new HashMap<>(); // guarded by mu
  private final List<Lease> holds = new ArrayList<>(); // guarded by mu
  private long nextOpId = 1; // guarded by mu
  private long brokeAtNanos; // when the current outage was noticed; 0 while up; guarded by mu
  private int failures; // streams ended in a row without opening; guarded by mu
  private boolean reconnectScheduled; // guarded by mu
  private String lastError = "not connected yet"; // guarded by mu
  private CompletableFuture<Void> ended; // completes when a half-closed stream ends

  SessionStream(LockdClient client, AcquirePath.SessionLease lease) {
    this.client = client;
    this.lease = lease;
  }

  /** The path of an acquire (AcquirePath.choose's rows). */
  AcquirePath choose(boolean clientsOwner, boolean autoRenew, Duration ttl) {
    synchronized (mu) {
      return AcquirePath.choose(
          client.config.useSessions && !closed, clientsOwner, autoRenew, lease, ttl);
    }
  }

  /**
   * One hold of each lock of {@code call} over the session; an empty list when not acquired in
   * time (the server answered {@code acquired: false}).
   *
   * @throws Unsupported the server has no Session RPC; nothing was sent
   * @throws InterruptedException the call was interruptible and interrupted (no hold is left)
   */
  List<Lease> acquire(AcquireCall call) throws InterruptedException, Unsupported {
    String requestId = LockdClient.newRequestId();
    while (true) {
      Op op;
      synchronized (mu) {
        SessionRequest.Builder req = SessionRequest.newBuilder();
        long id = nextOpId++;
        long now = System.nanoTime();
        if (call.all()) {
          req.setAcquireAll(SessionAcquireAll.newBuilder().setOpId(id)
              .setRequest(call.requestAll(requestId, now).toBuilder().clearLeaseTtl()));
        } else {
          req.setAcquire(SessionAcquire.newBuilder().setOpId(id)
              .setRequest(call.request(requestId, now).toBuilder().clearLeaseTtl()));
        }
        op = new Op(id, req.build(), call);
        submit(op);
      }
      drain(op);
      Object outcome;
      try {
        outcome = await(op, call.deadlineNanos(), call.interruptible());
      } catch (TimeoutException e) {
        boolean sent = abandon(op);
        throw Errors.of(sent ? Status.Code.DEADLINE_EXCEEDED : Status.Code.UNAVAILABLE,
            "lockd acquire of " + call.describe() + ": no answer before the deadline"
                + (sent ? "" : " (" + lastError() + ")"));
      } catch (InterruptedException e) {
        abandon(op);
        throw e;
      } catch (StreamBroken e) {
        boolean confirmed = client.undo(call, requestId);
        if (System.nanoTime() - call.deadlineNanos() >= 0) {
          LockdException err = Errors.of(Status.Code.UNAVAILABLE,
              "lockd acquire of " + call.describe() + ": " + e.getMessage());
          throw confirmed ? err : err.withUnconfirmedAcquire(requestId);
        }
        if (confirmed) {
          requestId = LockdClient.newRequestId();
        }
        continue;
      }
      @SuppressWarnings("unchecked")
      List<Lease> leases = (List<Lease>) outcome;
      return leases;
    }
  }

  /** Releases one hold over the stream (unary when no stream is up). */
  void release(Lease l) {
    ReleaseRequest req = ReleaseRequest.newBuilder()
        .setNamespace(l.namespace).setName(l.name).setOwner(l.owner)
        .setRequestId(LockdClient.newRequestId()).setFencingToken(l.fencingToken).build();
    Op op = null;
    synchronized (mu) {
      holds.remove(l);
      if (stream != null && stream.opened) {
        long id = nextOpId++;
        op = new Op(id, SessionRequest.newBuilder()
            .setRelease(SessionRelease.newBuilder().setOpId(id).setRequest(req)).build(), null);
        submit(op);
      }
    }
    if (op != null) {
      drain(op);
      try {
        Object outcome = await(op, System.nanoTime() + client.config.rpcTimeout.toNanos(), false);
        if (outcome instanceof LockdException e) {
          if (e instanceof LockLostException lostErr) {
            l.markLost(lostErr.reason(), "lockd no longer had it when it was released");
          }
          throw e;
        }
        return;
      } catch (TimeoutException | InterruptedException | Unsupported e) {
        abandon(op);
        throw Errors.of(Status.Code.DEADLINE_EXCEEDED, "lockd release of "
            + Errors.describe(l.namespace, l.name) + ": no answer in time");
      } catch (StreamBroken e) {
        // Repeat it unary with the same request_id: the server answers a repeat once.
      }
    }
    client.unaryRelease(l, req);
  }

  /** Stops tracking {@code l} (not resumed, no lost). */
  void forget(Lease l) {
    synchronized (mu) {
      holds.remove(l);
    }
  }

  /**
   * Half-closes the stream (the server releases every hold left) and waits up to
   * {@code timeout} for its end.
   */
  void close(Duration timeout) {
    CompletableFuture<Void> end;
    Stream s;
    synchronized (mu) {
      if (closed) {
        return;
      }
      closed = true;
      for (Op op : ops.values()) {
        op.done.complete(Errors.of(Status.Code.CANCELLED, "lockd client closed"));
      }
      ops.clear();
      if (stream == null) {
        return;
      }
      end = ended = new CompletableFuture<>();
      s = stream;
    }
    s.writer.finish(s.out::onCompleted);
    try {
      end.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      // The server ends the holds with their lease.
    }
    synchronized (mu) {
      s = stream;
    }
    if (s != null) {
      Stream last = s;
      last.writer.finish(() -> last.out.cancel("lockd client closed", null));
    }
  }

  // ------------------------------------------------------------------ under mu

  private void submit(Op op) {
    if (closed) {
      op.done.complete(Errors.of(Status.Code.CANCELLED, "lockd client closed"));
      return;
    }
    ops.put(op.id, op);
    if (stream != null && stream.opened) {
      queue(stream, op);
    } else if (stream == null && !reconnectScheduled) {
      startStream();
    }
  }

  private void startStream() {
    Stream s = new Stream();
    stream = s;
    SessionOpen.Builder open = SessionOpen.newBuilder()
        .setOwner(client.config.owner)
        .setNamespace(client.config.namespace)
        .setKeepOnDisconnect(client.config.keepOnDisconnect);
    if (!lease.asked().isZero()) {
      open.setLeaseTtl(Protos.duration(lease.asked()));
    }
    Set<String> listed = new HashSet<>(); // a reentrant hold is several Leases of one token
    for (Lease l : holds) {
      if (listed.add(key(l.namespace, l.name, l.fencingToken))) {
        open.addResume(LockRef.newBuilder()
            .setNamespace(l.namespace).setName(l.name).setFencingToken(l.fencingToken));
      }
    }
    // Ready when its previous write has left (BatchingWriter's rule 1); s.out is set by
    // beforeStart.
    ClientCalls.asyncBidiStreamingCall(client.channel.newCall(LockServiceGrpc.getSessionMethod(),
        client.callOptions().withOnReadyThreshold(1)), s);
    // Alone and first: nothing is queued on the writer before `opened`.
    s.out.onNext(SessionRequest.newBuilder().setOpen(open).build());
  }

  private static void queue(Stream s, Op op) {
    s.writer.queue(op.request);
    op.writer = s.writer;
    op.sent = true;
  }

  // ------------------------------------------------------------------ stream callbacks

  private void onOpened(Stream s, SessionOpened opened) {
    List<Lease> notResumed = new ArrayList<>();
    List<Op> unsent = new ArrayList<>();
    synchronized (mu) {
      if (s != stream) {
        return;
      }
      s.opened = true;
      failures = 0;
      brokeAtNanos = 0;
      lease.onOpened(Protos.duration(opened.getLeaseTtl()));
      Set<String> resumed = new HashSet<>();
      for (LockInfo info : opened.getResumedList()) {
        resumed.add(key(info.getNamespace(), info.getName(), info.getFencingToken()));
      }
      for (Lease l : new ArrayList<>(holds)) {
        if (resumed.contains(key(l.namespace, l.name, l.fencingToken))) {
          l.setValidUntil(Long.MAX_VALUE);
        } else {
          holds.remove(l);
          notResumed.add(l);
        }
      }
      for (Op op : ops.values()) {
        if (!op.sent) {
          unsent.add(op);
        }
      }
      unsent.sort((a, b) -> Long.compare(a.id, b.id));
      for (Op op : unsent) {
        queue(s, op);
      }
    }
    s.writer.drain();
    for (Lease l : notResumed) {
      l.markLost("NOT_RESUMED", "the new session did not get the hold back");
    }
  }

  private void onResult(Stream s, SessionResult result) {
    Op op;
    List<Lease> giveBack = List.of();
    Object outcome;
    synchronized (mu) {
      op = ops.remove(result.getOpId());
      if (op == null) {
        return;
      }
      outcome = outcome(op, result);
      if (op.abandoned && outcome instanceof List<?> granted) {
        giveBack = new ArrayList<>();
        for (Object o : granted) {
          Lease l = (Lease) o;
          holds.remove(l);
          giveBack.add(l);
        }
      }
    }
    for (Lease l : giveBack) {
      client.runCallback(() -> quietRelease(l));
    }
    op.done.complete(outcome);
  }

  /** The value an op's waiter gets: leases (empty: not acquired), a ReleaseResponse, an error. */
  private Object outcome(Op op, SessionResult result) {
    if (result.getStatus().getCode() != 0) {
      String what = op.acquire == null ? "release" : "acquire of " + op.acquire.describe();
      return Errors.fromRpcStatus("lockd " + what, result.getStatus());
    }
    if (op.acquire == null) {
      return result.getRelease();
    }
    List<AcquireResponse> granted;
    if (result.hasAcquireAll()) {
      if (!result.getAcquireAll().getAcquired()) {
        return List.of();
      }
      granted = result.getAcquireAll().getLocksList();
    } else {
      if (!result.getAcquire().getAcquired()) {
        return List.of();
      }
      granted = List.of(result.getAcquire());
    }
    List<Lease> leases = new ArrayList<>();
    for (int i = 0; i < granted.size() && i < op.acquire.locks().size(); i++) {
      AcquireResponse g = granted.get(i);
      Lease l = new Lease(client, op.acquire.locks().get(i), op.acquire.locks().get(i).namespace(),
          client.config.owner, g.getFencingToken(), Protos.duration(g.getLeaseTtl()), true,
          Long.MAX_VALUE);
      holds.add(l);
      leases.add(l);
    }
    return leases;
  }

  /** Every Lease of the hold (a reentrant hold may be several) is lost. */
  private void onLost(LockLost lost) {
    List<Lease> gone = new ArrayList<>();
    synchronized (mu) {
      for (Lease l : holds) {
        if (l.name.equals(lost.getName()) && l.fencingToken == lost.getFencingToken()
            && (lost.getNamespace().isEmpty() || l.namespace.equals(lost.getNamespace()))) {
          gone.add(l);
        }
      }
      holds.removeAll(gone);
    }
    for (Lease l : gone) {
      l.markLost(lost.getReason(), "lockd says " + lost.getReason());
    }
  }

  private void onEnd(Stream s, Status status) {
    List<Op> uncertain = new ArrayList<>();
    synchronized (mu) {
      if (s != stream) {
        return;
      }
      stream = null;
      if (ended != null) {
        ended.complete(null);
      }
      lastError = "session stream ended: " + status.getCode()
          + (status.getDescription() == null ? "" : ": " + status.getDescription());
      if (!s.opened && status.getCode() == Status.Code.UNIMPLEMENTED) {
        lease.onUnimplemented();
        failAll(new Unsupported());
        return;
      }
      if (!s.opened && status.getCode() == Status.Code.INVALID_ARGUMENT) {
        // The lease asked was refused: fail the ops waiting, the next acquire asks again.
        lease.onRefused(client.config.leaseTtl);
        LockdException err = Errors.fromThrowable("lockd session", status.asRuntimeException());
        for (Op op : ops.values()) {
          op.done.complete(err);
        }
        ops.clear();
      }
      for (Op op : new ArrayList<>(ops.values())) {
        if (op.sent) {
          ops.remove(op.id);
          uncertain.add(op);
        }
      }
      if (s.opened) {
        brokeAtNanos = System.nanoTime();
        Duration k = client.config.hangBound();
        for (Lease l : holds) {
          long until = LeaseValidity.sessionBreakValidUntil(brokeAtNanos, k, l.ttl,
              client.config.drift(l.ttl));
          l.setValidUntil(until);
          client.scheduler.schedule(l::isValid, Math.max(0, until - System.nanoTime()) + 1,
              TimeUnit.NANOSECONDS);
        }
      } else {
        failures++;
      }
      if (!closed && (!holds.isEmpty() || !ops.isEmpty())) {
        scheduleReconnect();
      }
    }
    for (Op op : uncertain) {
      if (!op.abandoned) {
        op.done.completeExceptionally(new StreamBroken(lastError()));
      } else if (op.acquire != null) {
        // Its caller is gone: undo it here.
        client.runCallback(() -> client.undo(op.acquire, requestIdOf(op)));
      }
    }
  }

  private void failAll(Exception e) {
    for (Op op : ops.values()) {
      op.done.completeExceptionally(e);
    }
    ops.clear();
  }

  private void scheduleReconnect() {
    reconnectScheduled = true;
    long cap = Math.min(2000, 100L << Math.min(failures, 5));
    long delay = cap / 2 + ThreadLocalRandom.current().nextLong(cap / 2 + 1);
    client.scheduler.schedule(() -> {
      synchronized (mu) {
        reconnectScheduled = false;
        if (!closed && stream == null && (!holds.isEmpty() || !ops.isEmpty())) {
          startStream();
        }
      }
    }, delay, TimeUnit.MILLISECONDS);
  }

  // ------------------------------------------------------------------ waiting

  /** Waits for {@code op}'s outcome: leases, a ReleaseResponse, or a LockdException thrown. */
  private Object await(Op op, long deadlineNanos, boolean interruptible)
      throws TimeoutException, InterruptedException, StreamBroken, Unsupported {
    boolean interrupted = false;
    try {
      while (true) {
        long left = deadlineNanos - System.nanoTime();
        try {
          Object outcome = op.done.get(Math.max(0, left), TimeUnit.NANOSECONDS);
          if (outcome instanceof LockdException e && op.acquire != null) {
            throw e;
          }
          return outcome;
        } catch (InterruptedException e) {
          if (interruptible) {
            throw e;
          }
          interrupted = true;
        } catch (ExecutionException e) {
          if (e.getCause() instanceof StreamBroken b) {
            throw b;
          }
          if (e.getCause() instanceof Unsupported u) {
            throw u;
          }
          throw Errors.fromThrowable("lockd session", e.getCause());
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * The caller stops waiting for {@code op}: a waiting acquire is cancelled on the stream, a late
   * grant is given back (onResult), an outcome lost with the stream is undone (onEnd).
   */
  private boolean abandon(Op op) {
    BatchingWriter cancelOn = null;
    synchronized (mu) {
      op.abandoned = true;
      if (!op.sent) {
        ops.remove(op.id);
        return false;
      }
      if (ops.containsKey(op.id) && op.acquire != null && stream != null && stream.opened) {
        cancelOn = stream.writer;
        cancelOn.queue(SessionRequest.newBuilder()
            .setCancel(SessionCancel.newBuilder().setOpId(op.id)).build());
      }
    }
    if (cancelOn != null) {
      cancelOn.drain();
    }
    return true;
  }

  /** Writes what the writer {@code op} was queued on holds, if nobody else is (never waits). */
  private static void drain(Op op) {
    BatchingWriter w = op.writer;
    if (w != null) {
      w.drain();
    }
  }

  private void quietRelease(Lease l) {
    try {
      release(l);
    } catch (RuntimeException e) {
      // Best effort: the hold ends with the session or its lease.
    }
  }

  private String lastError() {
    synchronized (mu) {
      return lastError;
    }
  }

  private static String requestIdOf(Op op) {
    return op.request.hasAcquire() ? op.request.getAcquire().getRequest().getRequestId()
        : op.request.getAcquireAll().getRequest().getRequestId();
  }

  private static String key(String ns, String name, long token) {
    return (ns.isEmpty() ? "default" : ns) + "\u0000" + name + "\u0000" + token;
  }
}
