#!/usr/bin/env python3
"""Latency of one thread's acquire and release through the Python client's
Session stream: N sequential acquire+release pairs of one lock, against one
lockd on the memory backend that this script starts (or --target).

Several clients can be compared in one run: each CLIENT_DIR is a folder
holding a `lockd` package (the client's sources with their generated
`_proto` stubs, e.g. an installed wheel's files); each runs in a child
process of this python with PYTHONPATH=CLIENT_DIR, round after round
(A, B, A, B, ...) against the same lockd, so that load on the machine
falls on both alike. Without CLIENT_DIR: the `lockd` this python imports.

  bench_p50.py --lockd build/dev/service/lockd [--pairs 2000] [--rounds 3]
               [--threads 1] [CLIENT_DIR ...]

Prints, per client, the p50 and p90 of acquire and of release in
microseconds over all rounds, and pairs/s. With --threads N, N threads
share the one Client, each doing --pairs pairs on a lock of its own.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def child(target: str, pairs: int, threads: int) -> None:
    # The CLIENT_DIR's lockd (PYTHONPATH), not the source folder beside
    # this script, which python puts first on the path.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import lockd

    import threading

    client = lockd.Client(target, rpc_timeout=10)
    acquires, releases = [], []  # list.append is atomic
    start = threading.Barrier(threads + 1)

    def run(name: str) -> None:
        for _ in range(pairs // 10):  # warm-up
            client.acquire(name, ttl=30).release()
        start.wait()
        for _ in range(pairs):
            t0 = time.perf_counter()
            lease = client.acquire(name, ttl=30)
            t1 = time.perf_counter()
            lease.release()
            t2 = time.perf_counter()
            acquires.append((t1 - t0) * 1e6)
            releases.append((t2 - t1) * 1e6)

    try:
        workers = [threading.Thread(target=run, args=("bench/p50-%d" % i,))
                   for i in range(threads)]
        for w in workers:
            w.start()
        start.wait()
        t0 = time.perf_counter()
        for w in workers:
            w.join()
        elapsed = time.perf_counter() - t0
        json.dump({"file": lockd.__file__, "acquire": acquires, "release": releases,
                   "elapsed": elapsed}, sys.stdout)
    finally:
        client.close()


def percentile(values, p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def start_lockd(binary: str, tmp: str):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = "127.0.0.1:%d" % port
    log = open(os.path.join(tmp, "lockd.log"), "wb")
    proc = subprocess.Popen([binary, "--listen=" + address], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log.name, errors="replace") as f:
            if "lockd serving on" in f.read():
                return proc, address
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("lockd did not start; see " + log.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lockd", help="the lockd binary (memory backend)")
    ap.add_argument("--target", help="a running lockd instead of --lockd")
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("clients", nargs="*", metavar="CLIENT_DIR")
    args = ap.parse_args()
    if args.child:
        child(args.target, args.pairs, args.threads)
        return
    if not args.lockd and not args.target:
        ap.error("give --lockd or --target")
    with tempfile.TemporaryDirectory(prefix="lockd-bench-p50-") as tmp:
        proc, target = start_lockd(args.lockd, tmp) if args.target is None else (None, args.target)
        try:
            dirs = args.clients or [None]
            samples = {d: {"acquire": [], "release": [], "elapsed": 0.0} for d in dirs}
            files = {}
            for _ in range(args.rounds):
                for d in dirs:
                    env = dict(os.environ)
                    if d is not None:
                        env["PYTHONPATH"] = os.path.abspath(d)
                    out = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), "--child", "--target", target,
                         "--pairs", str(args.pairs), "--threads", str(args.threads)],
                        env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
                    got = json.loads(out)
                    files[d] = got["file"]
                    for k in ("acquire", "release", "elapsed"):
                        samples[d][k] += got[k]
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()
    print("%d thread(s) on one Client, %d rounds x %d sequential acquire+release pairs each, "
          "lockd %s (memory)" % (args.threads, args.rounds, args.pairs, target))
    for d in dirs:
        s = samples[d]
        print("%s\n  acquire p50 %6.0f us p90 %6.0f us | release p50 %6.0f us p90 %6.0f us"
              " | %6.0f pairs/s"
              % (files[d], percentile(s["acquire"], 0.5), percentile(s["acquire"], 0.9),
                 percentile(s["release"], 0.5), percentile(s["release"], 0.9),
                 len(s["acquire"]) / s["elapsed"]))


if __name__ == "__main__":
    main()
