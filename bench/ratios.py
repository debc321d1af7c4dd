"""Prints, as Markdown tables, the ratios bench/kinds.sh,
bench/before_after.sh and bench/service.sh measure, from the JSON lines they write (one lockbench
report per line, with "label" and "rep" added). Every figure is the median
of a point's repetitions; a ratio divides two medians of the same run.

Usage:
  ratios.py kinds RESULTS.jsonl [--limit 4]
  ratios.py before-after RESULTS.jsonl
  ratios.py service RESULTS.jsonl
Exit status 0, or 1 if a run failed or was not ok (the tables still print).
"""

import argparse
import json
import statistics
import sys
from collections import defaultdict

BACKENDS = ("memory", "redis", "mysql", "zookeeper")


def load(path):
    """(points, bad): points[(backend, label, scenario)] = [report, ...];
    bad lists the failed or not-ok runs."""
    points, bad = defaultdict(list), []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("failed") or r.get("ok") is not True:
                bad.append(r)
                if r.get("failed"):
                    continue
            points[(r["backend"], r["label"], r["scenario"])].append(r)
    return points, bad


def median(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def fmt(v, digits=0):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "{:,.{}f}".format(v, digits)


def ratio(a, b):
    return None if a is None or not b else a / b


def backends_of(points):
    seen = {b for (b, _, _) in points}
    return [b for b in BACKENDS if b in seen] + sorted(seen - set(BACKENDS))


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|---" * len(header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def kinds(points, limit):
    sem = "semaphore-%d" % limit
    rw, semaphore, acquire_all = [], [], []
    for b in backends_of(points):
        rs = points.get((b, "rw-shared", "rw"), [])
        rx = points.get((b, "rw-exclusive", "rw"), [])
        s4 = points.get((b, sem, "semaphore"), [])
        s1 = points.get((b, "semaphore-1", "semaphore"), [])
        aa = points.get((b, "acquire-all", "acquire-all"), [])
        if rs or rx:
            rw.append([
                b, fmt(median(rs, "cs_per_s")), fmt(median(rx, "cs_per_s")),
                "**%s**" % fmt(ratio(median(rs, "cs_per_s"), median(rx, "cs_per_s")), 2),
                fmt(max((r["max_concurrent_readers"] for r in rs), default=None)),
                "%s / %s ms" % (fmt(median(rs, "read_acquire_p99_ms"), 1),
                                fmt(median(rs, "write_acquire_p99_ms"), 1)),
                "%s ms" % fmt(median(rx, "acquire_p99_ms"), 1),
                fmt(median(rs, "fairness"), 2)])
        if s4 or s1:
            semaphore.append([
                b, fmt(median(s4, "cs_per_s")), fmt(median(s1, "cs_per_s")),
                "**%s**" % fmt(ratio(median(s4, "cs_per_s"), median(s1, "cs_per_s")), 2),
                fmt(max((r["max_permits_held"] for r in s4), default=None)),
                "%s / %s ms" % (fmt(median(s4, "acquire_p99_ms"), 1),
                                fmt(median(s1, "acquire_p99_ms"), 1)),
                fmt(median(s4, "fairness"), 2)])
        if aa:
            acquire_all.append([
                b, fmt(median(aa, "cs_per_s")), "%s ms" % fmt(median(aa, "acquire_p99_ms"), 1),
                fmt(median(aa, "fairness"), 2), fmt(sum(r["wait_timeouts"] for r in aa)),
                fmt(sum(r["exclusion_violations"] for r in aa))])
    table(["backend", "rw shared CS/s", "rw all-exclusive CS/s", "ratio (>= 3)",
           "max readers together", "p99 read / write", "p99 all-exclusive", "fairness"], rw)
    table(["backend", "semaphore %d CS/s" % limit, "semaphore 1 CS/s", "ratio (>= 2.5)",
           "max permits held", "p99 limit %d / 1" % limit, "fairness"], semaphore)
    table(["backend", "acquire-all CS/s", "p99", "fairness", "wait timeouts",
           "violations"], acquire_all)


def before_after(points):
    rows = []
    for b in backends_of(points):
        for scenario, key in (("contended", "cs_per_s"), ("uncontended", "pairs_per_s")):
            before = points.get((b, "before", scenario), [])
            after = points.get((b, "after", scenario), [])
            if not before and not after:
                continue
            mb, ma = median(before, key), median(after, key)
            rows.append([b, "%s %s" % (scenario, key), fmt(mb), fmt(ma),
                         "**%s**" % fmt(ratio(ma, mb), 3),
                         "%s / %s ms" % (fmt(median(before, "acquire_p99_ms"), 2),
                                         fmt(median(after, "acquire_p99_ms"), 2))])
    table(["backend", "scenario", "before", "after", "after / before (>= 0.95)",
           "acquire p99 before / after"], rows)


def per_pair_us(runs, cpu_key, count_key):
    """Median over runs of CPU microseconds per pair or critical section."""
    values = [r[cpu_key] * 1e6 / r[count_key] for r in runs
              if cpu_key in r and r.get(count_key)]
    return statistics.median(values) if values else None


def verdict(value, target):
    if value is None:
        return "-"
    return "**%s** %s" % (fmt(value, 2), "met" if value >= target else "missed")


def service(points):
    """bench/service.sh: lockbench service per backend and API, its floors
    (grpc-floor: the null server) and the direct-Redis baseline."""
    def get(backend, label):
        scenario = "uncontended" if label == "direct" else "service"
        return points.get((backend, label, scenario), [])

    floor_u = median(get("grpc-floor", "unary-uncontended"), "pairs_per_s")
    floor_s = median(get("grpc-floor", "session-uncontended"), "pairs_per_s")
    direct = median(get("redis-direct", "direct"), "pairs_per_s")
    base = []
    for label, runs in (("grpc floor, unary", get("grpc-floor", "unary-uncontended")),
                        ("grpc floor, session", get("grpc-floor", "session-uncontended")),
                        ("Redis direct (hiredis)", get("redis-direct", "direct"))):
        if runs:
            base.append([label, fmt(median(runs, "pairs_per_s")),
                         "%s / %s ms" % (fmt(median(runs, "acquire_p50_ms"), 2),
                                         fmt(median(runs, "acquire_p99_ms"), 2)),
                         fmt(per_pair_us(runs, "cpu_client_s", "pairs")),
                         fmt(per_pair_us(runs, "cpu_lockd_s", "pairs")),
                         fmt(per_pair_us(runs, "cpu_redis_s", "pairs"))])
    table(["baseline (uncontended)", "pairs/s", "acquire p50 / p99",
           "client CPU µs/pair", "server CPU µs/pair", "Redis CPU µs/pair"], base)

    unc, con, targets = [], [], []
    backends = [b for b in backends_of(points) if b not in ("grpc-floor", "redis-direct")]
    for b in backends:
        uu, us = get(b, "unary-uncontended"), get(b, "session-uncontended")
        cu, cs = get(b, "unary-contended"), get(b, "session-contended")
        mu, ms = median(uu, "pairs_per_s"), median(us, "pairs_per_s")
        if uu or us:
            unc.append([
                b, fmt(mu), fmt(ms), fmt(ratio(ms, mu), 2), fmt(ratio(ms, floor_u), 2),
                fmt(ratio(ms, floor_s), 2), fmt(ratio(ms, direct), 2),
                "%s / %s ms" % (fmt(median(us, "acquire_p50_ms"), 2),
                                fmt(median(us, "acquire_p99_ms"), 2)),
                "%s / %s" % (fmt(per_pair_us(uu, "cpu_client_s", "pairs")),
                             fmt(per_pair_us(us, "cpu_client_s", "pairs"))),
                "%s / %s" % (fmt(per_pair_us(uu, "cpu_lockd_s", "pairs")),
                             fmt(per_pair_us(us, "cpu_lockd_s", "pairs"))),
                fmt(sum(r.get("errors", 0) for r in uu + us))])
        cmu, cms = median(cu, "cs_per_s"), median(cs, "cs_per_s")
        if cu or cs:
            con.append([
                b, fmt(cmu), fmt(cms), fmt(ratio(cms, cmu), 2),
                "%s / %s ms" % (fmt(median(cs, "acquire_p50_ms"), 2),
                                fmt(median(cs, "acquire_p99_ms"), 2)),
                "%s / %s" % (fmt(median(cu, "fairness"), 2), fmt(median(cs, "fairness"), 2)),
                fmt(sum(r.get("lost_updates", 0) + r.get("token_regressions", 0)
                        for r in cu + cs)),
                fmt(sum(r.get("errors", 0) for r in cu + cs))])
        if b == "memory":
            targets.append([b, "uncontended session / unary gRPC floor", ">= 3.0",
                            verdict(ratio(ms, floor_u), 3.0)])
        elif b == "redis":
            targets.append([b, "uncontended session / direct Redis", ">= 1.0",
                            verdict(ratio(ms, direct), 1.0)])
        else:
            targets.append([b, "uncontended session / unary", ">= 2.0",
                            verdict(ratio(ms, mu), 2.0)])
        targets.append([b, "contended session / unary CS/s", ">= 1.5",
                        verdict(ratio(cms, cmu), 1.5)])
        targets.append([b, "contended session fairness", ">= 0.8",
                        verdict(median(cs, "fairness"), 0.8)])
    table(["backend", "unary pairs/s", "session pairs/s", "session / unary",
           "session / unary floor", "session / session floor", "session / direct Redis",
           "session acquire p50 / p99", "client CPU µs/pair unary / session",
           "lockd CPU µs/pair unary / session", "errors"], unc)
    table(["backend", "unary CS/s", "session CS/s", "session / unary",
           "session acquire p50 / p99", "fairness unary / session",
           "lost updates + token regressions", "errors"], con)
    table(["backend", "figure", "target", "this run"], targets)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("kinds", "before-after", "service"))
    p.add_argument("results")
    p.add_argument("--limit", type=int, default=4)
    args = p.parse_args()
    points, bad = load(args.results)
    if args.mode == "kinds":
        kinds(points, args.limit)
    elif args.mode == "service":
        service(points)
    else:
        before_after(points)
    for r in bad:
        print("\nNOT OK: %s" % json.dumps({k: r.get(k) for k in (
            "label", "rep", "backend", "scenario", "exit", "failed", "lost_updates",
            "exclusion_violations", "wait_timeouts", "errors")}), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
