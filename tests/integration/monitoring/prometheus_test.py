#!/usr/bin/env python3
"""lockd's metrics scraped by a real Prometheus server (Debian's
`prometheus`), with the shipped alerting rules loaded and every Grafana
dashboard query run against it. lockd serves TLS with client certificates
and bearer tokens, driven by the Python client (which thereby uses its
tls_credentials and bearer_token options), and logs JSON lines.

Environment: LOCKD_BINARY, PYTHONPATH (the lockd package), SOURCE_DIR.
"""

import calendar
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import lockd

SOURCE_DIR = os.environ["SOURCE_DIR"]
LOCKD = os.environ["LOCKD_BINARY"]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SECRET_NAME = "order/secret-name-7f3a"  # must never appear in /metrics
SECRET_OWNER = "svc-orders/owner-5b2c"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, timeout, step=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what}")


class PrometheusTest(unittest.TestCase):
    logs = []

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="lockd-prom-")
        d = cls.dir
        subprocess.run(["bash", os.path.join(SOURCE_DIR, "tests/support/make_test_certs.sh"), d],
                       check=True, capture_output=True)
        with open(os.path.join(d, "tokens"), "w") as f:
            f.write("tok-orders svc-orders\ntok-ops ops-alice\ntok-dash dashboards\n")
        cls.metrics_port = free_port()
        cls.prom_port = free_port()
        cls.lockd_log = os.path.join(d, "lockd.log")
        rules = ("[{identities: [svc-orders], namespaces: ['*'], permissions: [lock, read]},"
                 " {identities: [ops-*], namespaces: ['*'], permissions: [admin, read]},"
                 " {identities: [dashboards], namespaces: [orders], permissions: [read]}]")
        for attempt in range(5):
            cls.port = free_port()
            cls.lockd = subprocess.Popen(
                [LOCKD, "--backend=memory", f"--listen=127.0.0.1:{cls.port}",
                 f"--metrics.listen=127.0.0.1:{cls.metrics_port}", "--metrics.namespaces=orders",
                 f"--tls.cert_file={d}/server.pem", f"--tls.key_file={d}/server.key",
                 f"--tls.client_ca_file={d}/ca.pem", "--tls.client_auth=require",
                 f"--auth.tokens_file={d}/tokens", f"--auth.rules={rules}", "--log.format=json",
                 "--lease.min=500ms"],
                stdout=cls.open_log(cls.lockd_log), stderr=subprocess.STDOUT)
            try:
                wait_for(lambda: "lockd serving on" in cls.log() or cls.lockd.poll() is not None,
                         30, what="lockd to start")
            except AssertionError:
                pass
            if cls.lockd.poll() is None and "lockd serving on" in cls.log():
                break
            cls.lockd.kill()
            cls.lockd.wait()
        else:
            raise AssertionError("lockd did not start: " + cls.log())

        prom_dir = os.path.join(d, "prometheus")
        os.makedirs(prom_dir)
        shutil.copy(os.path.join(SOURCE_DIR, "deploy/monitoring/lockd-alerts.yaml"), prom_dir)
        with open(os.path.join(prom_dir, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files: [lockd-alerts.yaml]\n"
                    "scrape_configs:\n  - job_name: lockd\n"
                    f"    static_configs: [{{targets: ['127.0.0.1:{cls.metrics_port}']}}]\n")
        cls.prom_log = os.path.join(d, "prometheus.log")
        cls.prometheus = subprocess.Popen(
            [PROMETHEUS, f"--config.file={prom_dir}/prometheus.yml",
             f"--storage.tsdb.path={prom_dir}/data", f"--web.listen-address=127.0.0.1:{cls.prom_port}"],
            stdout=cls.open_log(cls.prom_log), stderr=subprocess.STDOUT, cwd=prom_dir)
        wait_for(lambda: cls.query_or_none('up{job="lockd"} == 1'), 60,
                 what="Prometheus to scrape lockd")

        cls.client = cls.new_client("tok-orders")
        cls.load()

    @classmethod
    def tearDownClass(cls):
        try:
            cls.client.close()
        finally:
            for p in (cls.prometheus, cls.lockd):
                p.terminate()
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
            for f in cls.logs:
                f.close()
            shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def open_log(cls, path: str):
        f = open(path, "w")
        cls.logs.append(f)
        return f

    @classmethod
    def log(cls) -> str:
        with open(cls.lockd_log) as f:
            return f.read()

    @classmethod
    def new_client(cls, token: str, cert: str = "client-a") -> lockd.Client:
        d = cls.dir
        creds = lockd.tls_credentials(ca_file=f"{d}/ca.pem", cert_file=f"{d}/{cert}.pem",
                                      key_file=f"{d}/{cert}.key")
        return lockd.Client(f"127.0.0.1:{cls.port}", credentials=creds, server_name="lockd.test",
                            bearer_token=token, namespace="orders")

    @classmethod
    def load(cls):
        c = cls.client
        for i in range(20):
            with c.lock(f"order/{i}", ttl=5):
                pass
        other = cls.new_client("tok-orders")
        try:
            lease = other.acquire(SECRET_NAME, ttl=30, owner=SECRET_OWNER)
            with cls.assertRaises(cls, lockd.LockNotAcquired):
                c.try_acquire(SECRET_NAME, ttl=5)
            with cls.assertRaises(cls, lockd.LockNotAcquired):
                c.acquire(SECRET_NAME, ttl=5, wait=0.3)
            lease.renew()
            lease.release()
            # A lock in a namespace outside metrics.namespaces.
            with c.lock("x", ttl=5, namespace="billing"):
                pass
            # A lease that runs out: its holder's renewal finds it lost.
            short = other.acquire("short", ttl=0.5, auto_renew=False, owner="svc-orders/short")
            time.sleep(1.2)
            with cls.assertRaises(cls, lockd.LockLost):
                other.renew("short", "svc-orders/short", ttl=1)
            short.detach()
            # An operator force-releases a stuck lock.
            stuck = other.acquire("stuck", ttl=60, owner="svc-orders/stuck")
            ops = cls.new_client("tok-ops")
            released, previous = ops.force_release("stuck", "job 42 died")
            assert released and previous.owner == "svc-orders/stuck", previous
            stuck.detach()
            ops.close()
        finally:
            other.close()
        # Denied: dashboards may only read.
        dash = cls.new_client("tok-dash")
        try:
            with cls.assertRaises(cls, lockd.LockdError):
                dash.try_acquire("nope", ttl=5)
        finally:
            dash.close()

    @classmethod
    def query_or_none(cls, promql: str):
        url = (f"http://127.0.0.1:{cls.prom_port}/api/v1/query?" +
               urllib.parse.urlencode({"query": promql}))
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
        except OSError:
            return None
        if body.get("status") != "success":
            raise AssertionError(f"query {promql!r} failed: {body}")
        return body["data"]["result"] or None

    def value(self, promql: str, want, timeout=30):
        """Waits until the query's single value satisfies `want`; returns it."""
        def check():
            r = self.query_or_none(promql)
            if not r:
                return None
            v = float(r[0]["value"][1])
            return (v,) if want(v) else None
        return wait_for(check, timeout, 0.5, what=promql)[0]

    def test_acquire_outcomes_by_namespace_mode_and_result(self):
        self.value('sum(lockd_acquire_requests_total{namespace="orders",result="acquired"})',
                   lambda v: v >= 23)
        self.value('lockd_acquire_requests_total{namespace="orders",kind="exclusive",mode="try",'
                   'result="not_acquired",backend="memory"}', lambda v: v >= 1)
        self.value('lockd_acquire_requests_total{namespace="orders",kind="exclusive",mode="wait",'
                   'result="not_acquired"}', lambda v: v >= 1)
        self.value('lockd_acquire_requests_total{namespace="_other",kind="exclusive",'
                   'result="acquired"}',
                   lambda v: v == 1)
        self.assertIsNone(self.query_or_none('lockd_acquire_requests_total{namespace="billing"}'))
        self.value('lockd_acquire_wait_seconds_count{namespace="orders",kind="exclusive",'
                   'result="not_acquired"}',
                   lambda v: v >= 1)
        self.value('sum(lockd_acquire_grant_seconds_count)', lambda v: v >= 23)

    def test_holds_renewals_and_backend(self):
        self.value('lockd_hold_duration_seconds_count{namespace="orders",ended="released"}',
                   lambda v: v >= 21)
        self.value('lockd_hold_duration_seconds_count{namespace="orders",ended="force_released"}',
                   lambda v: v == 1)
        self.value('lockd_hold_duration_seconds_count{namespace="orders",ended="expired"}',
                   lambda v: v == 1)
        self.value('lockd_lease_renewals_total{namespace="orders",result="ok"}', lambda v: v >= 1)
        self.value('lockd_lease_renewals_total{namespace="orders",result="lost"}', lambda v: v == 1)
        self.value('lockd_force_releases_total{namespace="orders",result="released"}',
                   lambda v: v == 1)
        self.value('lockd_backend_request_duration_seconds_count{operation="release",result="ok"}',
                   lambda v: v >= 21)
        self.value('lockd_backend_up{backend="memory"}', lambda v: v == 1)
        self.value('lockd_build_info{backend="memory"}', lambda v: v == 1)
        with open(os.path.join(SOURCE_DIR, "VERSION")) as f:
            version = f.read().strip()
        self.value('lockd_build_info{backend="memory",version="%s",revision=~".+"}' % version,
                   lambda v: v == 1)
        self.value('lockd_fencing_token_regressions_total', lambda v: v == 0)

    def test_held_locks_and_waiters_gauges(self):
        c = self.new_client("tok-orders")
        try:
            lease = c.acquire("gauge", ttl=30)
            self.value("lockd_locks_held", lambda v: v == 1)
            waiter = self.new_client("tok-orders")
            t = threading.Thread(target=lambda: self.assertRaises(
                lockd.LockNotAcquired, waiter.acquire, "gauge", ttl=5, wait=6))
            t.start()
            self.value("lockd_waiters", lambda v: v == 1)
            t.join()
            waiter.close()
            lease.release()
            self.value("lockd_locks_held", lambda v: v == 0)
            self.value("lockd_waiters", lambda v: v == 0)
        finally:
            c.close()

    def test_denials_and_certificate_expiry(self):
        self.value('lockd_auth_denied_total{namespace="orders",permission="lock",'
                   'code="permission_denied"}', lambda v: v == 1)
        not_after = subprocess.run(
            ["openssl", "x509", "-in", f"{self.dir}/server.pem", "-noout", "-enddate"],
            check=True, capture_output=True, text=True).stdout.strip().split("=", 1)[1]
        expected = calendar.timegm(time.strptime(not_after, "%b %d %H:%M:%S %Y %Z"))
        self.value("lockd_tls_certificate_expiry_timestamp_seconds",
                   lambda v: abs(v - expected) < 2)

    def test_no_lock_name_owner_or_token_in_metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as r:
            text = r.read().decode()
        self.assertIn("lockd_acquire_requests_total", text)
        for secret in (SECRET_NAME, SECRET_OWNER, "order/1", "tok-orders", "svc-orders"):
            self.assertNotIn(secret, text)
        labels = set(re.findall(r'(\w+)="', text))
        self.assertLessEqual(labels, {"backend", "namespace", "mode", "result", "ended",
                                      "operation", "permission", "code", "le", "version",
                                      "revision", "quantile"})

    def test_alert_rules_load_and_dashboard_queries_run(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.prom_port}/api/v1/rules") as r:
            groups = json.load(r)["data"]["groups"]
        rules = [rule for g in groups for rule in g["rules"]]
        self.assertEqual(len(rules), 6)
        for rule in rules:
            self.assertEqual(rule["health"], "ok", rule)
        with open(os.path.join(SOURCE_DIR, "deploy/monitoring/lockd-dashboard.json")) as f:
            dashboard = json.load(f)
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        self.assertGreaterEqual(len(exprs), 10)
        for expr in exprs:
            promql = expr.replace("$instance", ".*").replace("$__rate_interval", "1m")
            for name in re.findall(r"\b(lockd_\w+)", promql):
                base = re.sub(r"_(bucket|count|sum)$", "", name)
                self.assertIsNotNone(self.query_or_none(f"{{__name__=~'{base}.*'}}"),
                                     f"{name} in the dashboard is not exported")
            self.query_or_none(promql)  # raises if Prometheus rejects it

    def test_log_lines_are_json_with_audit_fields(self):
        lines = [json.loads(l) for l in self.log().splitlines() if l.strip()]
        for l in lines:
            self.assertLessEqual({"ts", "level", "msg"}, set(l))
        audits = [l for l in lines if l.get("audit") == "force_release"]
        self.assertEqual(len(audits), 1, lines)
        a = audits[0]
        self.assertEqual((a["identity"], a["namespace"], a["name"], a["reason"], a["result"],
                          a["previous_owner"]),
                         ("ops-alice", "orders", "stuck", "job 42 died", "released",
                          "svc-orders/stuck"))
        denied = [l for l in lines if l.get("audit") == "denied"]
        self.assertEqual([(l["identity"], l["permission"], l["code"]) for l in denied],
                         [("dashboards", "lock", "PERMISSION_DENIED")])
        self.assertNotIn("tok-", self.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)
