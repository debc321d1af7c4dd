#!/usr/bin/env python3
"""Turns bench/run.sh's raw results into the generated part of
bench/RESULTS.md (between the BEGIN/END GENERATED markers; the text around
them is written by hand and kept) and the PNG charts.

Every figure is the median over the repetitions of one point (backend,
API, scenario, clients); throughput also shows the min-max range. A run
through lockd's Session stream (lockbench --api=session) is labelled
"<backend>+session"; unary runs keep the backend's name, so results recorded
before sessions existed read as unary. "Unary vs Session" puts the two side
by side.

Usage: report.py --out bench/results --results bench/RESULTS.md --charts bench/charts
"""

import argparse
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys

BEGIN = "<!-- BEGIN GENERATED (bench/report.py) -->"
END = "<!-- END GENERATED -->"

BACKEND_ORDER = ["memory", "grpc-floor", "redis", "redis-direct", "mysql", "zookeeper"]
SESSION = "+session"
NOTES = {"redis-direct": "baseline: hiredis + the same scripts, no lockd",
         "grpc-floor": "gRPC floor: a LockService doing no lock work",
         "grpc-floor" + SESSION: "stream floor: a Session doing no lock work"}

# Issue 7's targets, at 16 clients: (min CS/s, max acquire p99 ms,
# min fairness, min pairs/s, max handoff p50 ms).
TARGETS = {
    "redis": (2500, 15, 0.8, 20000, 0.5),
    "zookeeper": (1100, 40, 0.8, 6000, 3),
    "mysql": (1200, 60, 0.8, 5000, 10),
    "memory": (5000, 10, 0.8, 25000, 0.3),
}
TARGET_CLIENTS = 16
WAITERS_RSS_LIMIT_KB = 200 * 1024
# The sessions issue's target: 10,000 sessions each holding one lock.
HOLDERS_RSS_LIMIT_MB = 300
HOLDERS_TARGET_SESSIONS = 10000
# Threads lockd may add under load whatever the session count (gRPC's
# executor grows by a few threads when busy): more is a thread per session.
HOLDERS_THREAD_SLACK = 8
DIRECT_RATIO_GOAL = 0.4


def load(out):
    """Returns (env_runs, runs, failures); env_runs is one dict per run.sh run."""
    env_runs = []
    with open(os.path.join(out, "env.txt")) as f:
        for line in f:
            if "=" not in line:
                continue
            k, v = line.rstrip("\n").split("=", 1)
            if k == "run" or not env_runs:
                env_runs.append(collections.OrderedDict())
            env_runs[-1][k] = v
    # Results written before run ids existed sort before every id.
    first = env_runs[0].get("run", "0") if env_runs else "0"
    runs, failures = [], []
    with open(os.path.join(out, "raw.jsonl")) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            r.setdefault("run", first)
            if r.get("api") == "session":
                r["label"] += SESSION
            (failures if r.get("failed") else runs).append(r)
    return env_runs, runs, failures


def group(runs):
    """Runs by (label, scenario, clients), keeping only the latest run.sh run
    of each point (bench/run.sh --append re-measures some)."""
    g = collections.defaultdict(list)
    for r in runs:
        g[(r["label"], r["scenario"], r["clients"])].append(r)
    for k, rs in g.items():
        latest = max(r["run"] for r in rs)
        g[k] = [r for r in rs if r["run"] == latest]
    return g


def med(rs, key):
    vals = [r[key] for r in rs if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
    return statistics.median(vals) if vals else None


def rng(rs, key):
    vals = [r[key] for r in rs if isinstance(r.get(key), (int, float))]
    return (min(vals), max(vals)) if vals else (None, None)


def fmt(v, digits=None):
    if v is None:
        return "-"
    if digits is None and float(v).is_integer():
        return "{:,}".format(int(v))
    if digits is None:
        if abs(v) >= 100:
            digits = 0
        elif abs(v) >= 10:
            digits = 1
        elif abs(v) >= 1:
            digits = 2
        else:
            digits = 3
    if digits == 0:
        return "{:,.0f}".format(v)
    return "{:,.{d}f}".format(v, d=digits)


def base(label):
    return label[:-len(SESSION)] if label.endswith(SESSION) else label


def labels_in(g):
    """Backends in BACKEND_ORDER, each one's session runs right after its unary ones."""
    present = {k[0] for k in g}
    order = [l for b in BACKEND_ORDER for l in (b, b + SESSION)]
    return [l for l in order if l in present] + sorted(present - set(order))


def clients_in(g, label, scenario):
    return sorted(c for (l, s, c) in g if l == label and s == scenario)


def mark(ok):
    return "met" if ok else "**MISSED**"


def headline(g):
    lines = []
    lines.append("### Against the targets ({} clients)\n".format(TARGET_CLIENTS))
    lines.append("| backend | contended CS/s | acquire p99 | fairness min/max | uncontended pairs/s | handoff p50 |")
    lines.append("|---|---|---|---|---|---|")
    verdicts = []
    for label in labels_in(g):
        c = g.get((label, "contended", TARGET_CLIENTS), [])
        u = g.get((label, "uncontended", TARGET_CLIENTS), [])
        if not c and not u:
            continue
        cs, p99, fair = med(c, "cs_per_s"), med(c, "acquire_p99_ms"), med(c, "fairness")
        pairs = med(u, "pairs_per_s")
        hand = med(c, "handoff_p50_ms") if med(c, "handoff_samples") else None
        t = TARGETS.get(base(label))
        if t is None:
            cells = [fmt(cs), fmt(p99) + " ms", fmt(fair, 2), fmt(pairs), fmt(hand) + " ms"]
            lines.append("| {} ({}) | {} |".format(label, NOTES.get(label, "no target"), " | ".join(cells)))
            continue
        checks = [
            (cs is not None and cs >= t[0], "{} (>= {:,})".format(fmt(cs), t[0])),
            (p99 is not None and p99 <= t[1], "{} ms (<= {} ms)".format(fmt(p99), t[1])),
            (fair is not None and fair >= t[2], "{} (>= {})".format(fmt(fair, 2), t[2])),
            (pairs is not None and pairs >= t[3], "{} (>= {:,})".format(fmt(pairs), t[3])),
            (hand is not None and hand <= t[4], "{} ms (<= {} ms)".format(fmt(hand), t[4])),
        ]
        values = [cs, p99, fair, pairs, hand]
        cells = ["{} {}".format(text, mark(ok)) if v is not None else "not measured"
                 for (ok, text), v in zip(checks, values)]
        lines.append("| {} | {} |".format(label, " | ".join(cells)))
        names = ["contended CS/s", "acquire p99", "fairness", "uncontended pairs/s", "handoff p50"]
        for (ok, text), name, v in zip(checks, names, values):
            if not ok and v is not None:
                verdicts.append("{} {}: {}".format(label, name, text))
    lines.append("")
    f = g.get(("grpc-floor", "uncontended", TARGET_CLIENTS), [])
    m = g.get(("memory", "uncontended", TARGET_CLIENTS), [])
    if f and m:
        lines.append(
            "gRPC floor: lockd on the memory backend reaches **{:.2f}x** of the uncontended pairs/s "
            "of `lockbench_null_server`, a LockService that does no lock work at all, served the "
            "same way ({} vs {} at {} clients).".format(
                med(m, "pairs_per_s") / med(f, "pairs_per_s"), fmt(med(m, "pairs_per_s")),
                fmt(med(f, "pairs_per_s")), TARGET_CLIENTS))
        lines.append("")
    d = g.get(("redis-direct", "uncontended", TARGET_CLIENTS), [])
    l = g.get(("redis", "uncontended", TARGET_CLIENTS), [])
    if d and l:
        ratio = med(l, "pairs_per_s") / med(d, "pairs_per_s")
        lines.append(
            "Service-hop cost: lockd on redis reaches **{:.2f}x** of the direct hiredis baseline's "
            "uncontended pairs/s at {} clients (goal >= {}: {}).".format(
                ratio, TARGET_CLIENTS, DIRECT_RATIO_GOAL, mark(ratio >= DIRECT_RATIO_GOAL)))
        if ratio < DIRECT_RATIO_GOAL:
            verdicts.append("redis uncontended / direct ratio: {:.2f} (>= {})".format(ratio, DIRECT_RATIO_GOAL))
        lines.append("")
    return lines, verdicts


def ratio_line(g, text, num, den, key, note=""):
    """One "text: **x.xx**" line for med(num)/med(den) at TARGET_CLIENTS, or
    None when either point was not measured."""
    n = g.get((num[0], num[1], TARGET_CLIENTS), [])
    d = g.get((den[0], den[1], TARGET_CLIENTS), [])
    nv, dv = med(n, key), med(d, key)
    if not nv or not dv:
        return None
    return "- {}: **{:.2f}x** ({} vs {}){}".format(text, nv / dv, fmt(nv), fmt(dv), note)


def sessions_section(g):
    """Unary calls and the Session stream side by side, and the ratios asked
    for: each figure through lockd's Session over a reference."""
    if not any(l.endswith(SESSION) and s in ("contended", "uncontended") for (l, s, _) in g):
        return []
    lines = ["### Unary vs Session\n",
             "The same scenario through unary RPCs (one call per acquire/release) and through "
             "one Session stream per client (each acquire/release an op on it, one outstanding "
             "per client). Ratios at {} clients, throughput over throughput:\n".format(TARGET_CLIENTS)]
    U, C = "uncontended", "contended"
    pairs, cs = "pairs_per_s", "cs_per_s"
    wanted = [
        ratio_line(g, "memory via Session / unary gRPC floor (uncontended pairs/s)",
                   ("memory" + SESSION, U), ("grpc-floor", U), pairs),
        ratio_line(g, "memory via Session / stream floor (uncontended pairs/s; a Session doing no work)",
                   ("memory" + SESSION, U), ("grpc-floor" + SESSION, U), pairs),
        ratio_line(g, "stream floor / unary gRPC floor (uncontended pairs/s)",
                   ("grpc-floor" + SESSION, U), ("grpc-floor", U), pairs),
        ratio_line(g, "redis via Session / direct Redis (uncontended pairs/s)",
                   ("redis" + SESSION, U), ("redis-direct", U), pairs),
        ratio_line(g, "redis via Session / direct Redis (contended CS/s)",
                   ("redis" + SESSION, C), ("redis-direct", C), cs),
    ]
    for b in ("memory", "redis", "mysql", "zookeeper"):
        wanted.append(ratio_line(g, "{} Session / unary (uncontended pairs/s)".format(b),
                                 (b + SESSION, U), (b, U), pairs))
        wanted.append(ratio_line(g, "{} Session / unary (contended CS/s)".format(b),
                                 (b + SESSION, C), (b, C), cs))
    lines += [w for w in wanted if w] + [""]
    lines.append("| backend | scenario | clients | unary /s | session /s | session / unary "
                 "| acquire p50 ms unary / session | acquire p99 ms unary / session |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for b in [l for l in labels_in(g) if not l.endswith(SESSION)]:
        for scenario, key in ((C, cs), (U, pairs)):
            for c in clients_in(g, b + SESSION, scenario):
                un, se = g.get((b, scenario, c), []), g[(b + SESSION, scenario, c)]
                uv, sv = med(un, key), med(se, key)
                lines.append("| {} | {} | {} | {} | {} | {} | {} / {} | {} / {} |".format(
                    b, scenario, c, fmt(uv), fmt(sv),
                    "{:.2f}x".format(sv / uv) if uv and sv else "-",
                    fmt(med(un, "acquire_p50_ms")), fmt(med(se, "acquire_p50_ms")),
                    fmt(med(un, "acquire_p99_ms")), fmt(med(se, "acquire_p99_ms"))))
    lines.append("")
    return lines


def waiters_table(g):
    lines = ["### Parked waiters (lockd process, from /proc)\n",
             "| backend | clients | waiters | lockd RSS idle | RSS parked | per waiter | threads idle / parked | park | drain |",
             "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for label in labels_in(g):
        for c in clients_in(g, label, "waiters"):
            rs = g[(label, "waiters", c)]
            rss = med(rs, "rss_parked_kb")
            ti, tp = med(rs, "threads_idle"), med(rs, "threads_parked")
            streams = med(rs, "sessions")
            lines.append("| {} | {} | {} | {} MB | {} MB | {} B | {} / {} | {} s | {} s |".format(
                label + (" ({} streams)".format(fmt(streams)) if streams else ""), c, fmt(med(rs, "waiters")), fmt(med(rs, "rss_idle_kb") / 1024, 1),
                fmt(rss / 1024, 1), fmt(med(rs, "rss_per_waiter_bytes")), fmt(ti), fmt(tp),
                fmt(med(rs, "park_s"), 2), fmt(med(rs, "drain_s"), 2)))
            if rss is not None and rss > WAITERS_RSS_LIMIT_KB:
                verdicts.append("{} waiters (C={}): lockd RSS {} MB > 200 MB".format(label, c, fmt(rss / 1024, 1)))
            # gRPC starts a second timer thread once deadline timers run (also
            # with 10 waiters): a constant, not a thread per waiter.
            if ti is not None and tp is not None and tp > ti + 2:
                verdicts.append("{} waiters (C={}): threads grew {} -> {}".format(label, c, ti, tp))
    lines.append("")
    if any(l.endswith(SESSION) and s == "waiters" for (l, s, _) in g):
        lines.append("`+session` rows park the waiters as ops on few Session streams (100 per "
                     "stream). The waiters of a stream share its owner, so when one of them is "
                     "granted a lock its stream's other waiters on that lock are granted at once "
                     "(reentrantly): the drain hands each lock over once per stream, not once "
                     "per waiter.\n")
    return lines, verdicts


def holders_table(g):
    """The holders scenario: N Session streams each holding one lock for
    several leases, renewed by lockd; lockd's RSS and threads from /proc."""
    keys = [k for k in g if k[1] == "holders"]
    if not keys:
        return [], []
    lines = ["### Session holders (N streams, one lock each, renewed by lockd; lockd process from /proc)\n",
             "| backend | sessions | channels | lease | hold | setup | acquire p50 / p99 | lost "
             "| lockd RSS idle / full / after | per session | threads idle / full / after | ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for label in labels_in(g):
        for c in clients_in(g, label, "holders"):
            rs = g[(label, "holders", c)]
            n, lost, full = med(rs, "sessions"), max(r.get("lost", 0) for r in rs), med(rs, "rss_full_mb")
            ti, tf = med(rs, "threads_idle"), med(rs, "threads_full")
            ok = all(r.get("ok") is True for r in rs)
            lines.append("| {} | {} | {} | {} s | {} s | {} s | {} / {} ms | {} | {} / {} / {} MB "
                         "| {} B | {} / {} / {} | {} |".format(
                             label, fmt(n), c, fmt(med(rs, "lease_ms") / 1000), fmt(med(rs, "hold_ms") / 1000),
                             fmt(med(rs, "setup_s"), 2), fmt(med(rs, "acquire_p50_ms")),
                             fmt(med(rs, "acquire_p99_ms")), fmt(lost), fmt(med(rs, "rss_idle_mb"), 1),
                             fmt(full, 1), fmt(med(rs, "rss_after_mb"), 1),
                             fmt(med(rs, "rss_per_session_bytes"), 0), fmt(ti), fmt(tf),
                             fmt(med(rs, "threads_after")), "yes" if ok else "**NO**"))
            where = "{} holders ({} sessions)".format(label, fmt(n))
            if n is not None and n < HOLDERS_TARGET_SESSIONS:
                where += " [target is for {:,}]".format(HOLDERS_TARGET_SESSIONS)
            if full is not None and full > HOLDERS_RSS_LIMIT_MB:
                verdicts.append("{}: lockd RSS {} MB > {} MB".format(where, fmt(full, 1), HOLDERS_RSS_LIMIT_MB))
            if lost:
                verdicts.append("{}: {} hold(s) lost (must be 0)".format(where, lost))
            if ti is not None and tf is not None and tf > ti + HOLDERS_THREAD_SLACK:
                verdicts.append("{}: threads grew {} -> {}".format(where, fmt(ti), fmt(tf)))
            if not ok:
                verdicts.append("{}: ok=false (a stream failed, or a lock was not held/released)".format(where))
    lines.append("")
    lines.append("Targets: lockd RSS <= {} MB at {:,} sessions, thread count independent of the "
                 "sessions (at most {} more than idle), 0 lost. `setup` opens every stream and "
                 "acquires its lock (all at once); the acquire latency includes the stream's "
                 "open.\n".format(HOLDERS_RSS_LIMIT_MB, HOLDERS_TARGET_SESSIONS, HOLDERS_THREAD_SLACK))
    return lines, verdicts


def scenario_table(g, scenario, columns):
    columns = list(columns) + [("load", "load1_before", False)]
    lines = ["| backend | clients | " + " | ".join(c[0] for c in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for label in labels_in(g):
        for c in clients_in(g, label, scenario):
            rs = g[(label, scenario, c)]
            cells = []
            for title, key, with_range in columns:
                v = med(rs, key)
                if key.startswith("handoff_") and not med(rs, "handoff_samples"):
                    v = None  # no waiter was ever handed the lock (1 client)
                cell = fmt(v, 1) if key == "load1_before" else fmt(v)
                if with_range and len(rs) > 1:
                    lo, hi = rng(rs, key)
                    cell += " ({}-{})".format(fmt(lo), fmt(hi))
                cells.append(cell)
            lines.append("| {} | {} | {} |".format(label, c, " | ".join(cells)))
    lines.append("")
    return lines


def cpu_table(g, cpus):
    """CPU time per operation by process: where the 2 CPUs go."""
    lines = ["### CPU cost per operation (16 clients; from /proc and time(1))\n",
             "Per uncontended pair (acquire + release) and per contended critical section "
             "(acquire + GET + SET + release): CPU microseconds used by each process during "
             "the run, divided by the operations done. `ceiling` = {} CPUs / total: the rate "
             "at which the processes of the benchmark alone would saturate the machine.\n".format(cpus),
             "| backend | scenario | lockd | redis-server | database/ZooKeeper | lockbench (client) | total | ceiling/s | measured/s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label in labels_in(g):
        for scenario, count_key, rate_key in (("uncontended", "pairs", "pairs_per_s"),
                                              ("contended", "critical_sections", "cs_per_s")):
            rs = g.get((label, scenario, TARGET_CLIENTS), [])
            rs = [r for r in rs if r.get(count_key) and "cpu_client_s" in r]
            if not rs:
                continue
            def per(key):
                return statistics.median(r[key] * 1e6 / r[count_key] for r in rs)
            parts = [per("cpu_lockd_s"), per("cpu_redis_s"), per("cpu_db_s"), per("cpu_client_s")]
            total = sum(parts)
            lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                label, scenario, *[fmt(p, 0) + " us" for p in parts], fmt(total, 0) + " us",
                fmt(cpus * 1e6 / total if total else None, 0), fmt(med(rs, rate_key), 0)))
    lines.append("")
    return lines


def write_dat(g, scenario, key, path):
    wrote = []
    with open(path, "w") as f:
        for label in labels_in(g):
            cs = clients_in(g, label, scenario)
            if not cs:
                continue
            f.write("# {}\n".format(label))
            for c in cs:
                v = med(g[(label, scenario, c)], key)
                if v is not None:
                    f.write("{} {}\n".format(c, v))
            f.write("\n\n")
            wrote.append(label)
    return wrote


def charts(g, out, chart_dir):
    if shutil.which("gnuplot") is None:
        print("report.py: gnuplot not found; no charts", file=sys.stderr)
        return []
    os.makedirs(chart_dir, exist_ok=True)
    specs = {
        "throughput.png": [
            ("contended", "cs_per_s", "contended: critical sections/s (counter in Redis)", "CS/s"),
            ("uncontended", "pairs_per_s", "uncontended: acquire+release pairs/s", "pairs/s"),
        ],
        "latency_p99.png": [
            ("contended", "acquire_p99_ms", "contended: acquire latency p99 (incl. waiting)", "ms"),
            ("uncontended", "acquire_p99_ms", "uncontended: acquire latency p99", "ms"),
        ],
    }
    made = []
    for png, panels in specs.items():
        script = ["set terminal pngcairo size 1400,560 font 'sans,11'",
                  "set output '{}'".format(os.path.join(chart_dir, png)),
                  "set multiplot layout 1,2",
                  "set logscale x 2", "set logscale y", "set grid",
                  "set xlabel 'clients'", "set key top left", "set xrange [0.8:80]",
                  "set xtics (1,2,4,8,16,32,64)"]
        for scenario, key, title, unit in panels:
            dat = os.path.join(out, "{}_{}.dat".format(scenario, key))
            labels = write_dat(g, scenario, key, dat)
            if not labels:
                continue
            script.append("set title '{}'".format(title))
            script.append("set ylabel '{}'".format(unit))
            plots = ["'{}' index {} using 1:2 with linespoints lw 2 pt 7 title '{}'".format(dat, i, l)
                     for i, l in enumerate(labels)]
            script.append("plot " + ", ".join(plots))
        script.append("unset multiplot")
        gp = os.path.join(out, png.replace(".png", ".gp"))
        with open(gp, "w") as f:
            f.write("\n".join(script) + "\n")
        p = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if p.returncode != 0 and "pngcairo" in p.stderr:
            with open(gp, "w") as f:
                f.write("\n".join(script).replace("pngcairo", "png") + "\n")
            p = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if p.returncode != 0:
            print("report.py: gnuplot failed for {}: {}".format(png, p.stderr), file=sys.stderr)
            continue
        made.append(png)
    return made


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--charts", required=True)
    a = ap.parse_args()
    env_runs, runs, failures = load(a.out)
    env = env_runs[-1] if env_runs else {}
    g = group(runs)

    md = [BEGIN, ""]
    md.append("## Run conditions (generated)\n")
    keys = []
    for e in env_runs:
        keys += [k for k in e if k not in keys]
    md.append("| | " + " | ".join("run {}".format(i + 1) for i in range(len(env_runs))) + " |")
    md.append("|---|" + "---|" * len(env_runs))
    for k in keys:
        md.append("| {} | {} |".format(k, " | ".join(e.get(k, "").replace("|", "\\|") for e in env_runs)))
    md.append("")
    md.append("Exact commands: {}; every lockd and lockbench command line (with its ports) is in "
              "[results/commands.txt](results/commands.txt), every run's JSON in "
              "[results/raw.jsonl](results/raw.jsonl) (with the 1-minute load average before it, "
              "`load1_before`, and the CPU seconds of each process). Where a point was measured "
              "in several runs, the tables use the latest.\n".format(
                  ", ".join("`bench/run.sh {}`".format(e.get("args", "")).replace("`bench/run.sh `", "`bench/run.sh`")
                            for e in env_runs)))

    md.append("## Results (generated; medians over {} repetition(s))\n".format(env.get("reps", "?")))
    md.append("`load` columns: median 1-minute load average just before the runs of a point, "
              "including the benchmark's own processes (about 2 when the machine is otherwise "
              "idle); higher means other work shared the 2 CPUs.\n")
    h, verdicts = headline(g)
    md += h
    md += sessions_section(g)
    w, wv = waiters_table(g)
    verdicts += wv
    hl, hv = holders_table(g)
    verdicts += hv
    made = charts(g, a.out, a.charts)
    rel = os.path.relpath(a.charts, os.path.dirname(os.path.abspath(a.results)))
    for png in made:
        md.append("![{}]({}/{})\n".format(png, rel, png))
    md.append("### contended (one lock; critical section = GET + SET of a counter in Redis)\n")
    md += scenario_table(g, "contended", [
        ("CS/s (min-max)", "cs_per_s", True), ("acquire p50 ms", "acquire_p50_ms", False),
        ("p90", "acquire_p90_ms", False), ("p99", "acquire_p99_ms", False),
        ("max", "acquire_max_ms", False), ("handoff p50 ms", "handoff_p50_ms", False),
        ("handoff p99", "handoff_p99_ms", False), ("fairness", "fairness", False),
        ("lost updates", "lost_updates", False)])
    md.append("### uncontended (own lock names; acquire without wait + release)\n")
    md += scenario_table(g, "uncontended", [
        ("pairs/s (min-max)", "pairs_per_s", True), ("acquire p50 ms", "acquire_p50_ms", False),
        ("p90", "acquire_p90_ms", False), ("p99", "acquire_p99_ms", False),
        ("release p50 ms", "release_p50_ms", False), ("release p99", "release_p99_ms", False)])
    md += w
    md += hl
    try:
        cpus = int(env.get("cpus", "2"))
    except ValueError:
        cpus = 2
    md += cpu_table(g, cpus)
    md.append("### expiry (holders never release; lease 1 s; delay from one grant + lease to the next grant)\n")
    md += scenario_table(g, "expiry", [
        ("grants", "grants_after_expiry", False), ("delay p50 ms", "delay_p50_ms", False),
        ("p90", "delay_p90_ms", False), ("max", "delay_max_ms", False)])
    bad = [r for r in runs if r.get("ok") is False or r.get("lost_updates", 0) != 0
           or r.get("lost", 0) != 0]
    md.append("### Failed or not-ok runs\n")
    if not failures and not bad:
        md.append("None: every run finished with ok=true and 0 lost updates.\n")
    for r in failures:
        md.append("- {} rep {}: exit {} ({})".format(r["label"], r["rep"], r["exit"], r.get("args", "")))
    for r in bad:
        md.append("- {} {} C={} rep {}: ok={}{}{}".format(
            r["label"], r["scenario"], r["clients"], r["rep"], r.get("ok"),
            " lost_updates={}".format(r["lost_updates"]) if "lost_updates" in r else "",
            " lost={}".format(r["lost"]) if "lost" in r else ""))
    md.append("")
    md.append("### Targets missed in this run\n")
    md += ["- " + v for v in verdicts] or ["None."]
    md += ["", END]

    text = ""
    if os.path.exists(a.results):
        with open(a.results) as f:
            text = f.read()
    block = "\n".join(md) + "\n"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block.rstrip("\n") + text[text.index(END) + len(END):]
    else:
        text = "# lockd benchmark results\n\n" + block
    with open(a.results, "w") as f:
        f.write(text)
    print("report.py: wrote {} and {} chart(s)".format(a.results, len(made)))


if __name__ == "__main__":
    main()
