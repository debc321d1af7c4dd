// The Helm chart (deploy/helm/lockd) rendered by the real Helm, each object
// checked against the Kubernetes schemas, and the rendered lockd
// configuration fed to the real lockd.
//
// Run: HELM=... LOCKD=... CHART=deploy/helm/lockd node --test chart.test.mjs
// from the folder setup-tools.sh installed the packages into (ctest: deploy_chart_test).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync, mkdirSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { parseAllDocuments, parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { validateObject } from './k8s-validate.mjs';

const CHART = process.env.CHART;
const HELM = process.env.HELM;
const LOCKD = process.env.LOCKD;
assert.ok(HELM && LOCKD && CHART, 'set HELM, LOCKD and CHART (ctest does)');

// The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and a current one.
const KUBE_VERSIONS = ['1.25.0', '1.32.0'];
const CI_FILES = readdirSync(join(CHART, 'ci')).filter((f) => f.endsWith('-values.yaml')).sort();

function helm(args) {
  return execFileSync(HELM, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

// Renders the chart; returns its objects. `values` are files under ci/ or
// absolute paths; `set` are --set strings.
function render({ values = [], set = [], kubeVersion = KUBE_VERSIONS[1] } = {}) {
  const args = ['template', 'rel', CHART, '--namespace', 'locks', '--kube-version', kubeVersion];
  for (const v of values) args.push('-f', v.startsWith('/') ? v : join(CHART, 'ci', v));
  for (const s of set) args.push('--set', s);
  return parseAllDocuments(helm(args)).map((d) => d.toJS()).filter(Boolean);
}

function renderFails(opts) {
  try {
    render(opts);
  } catch (e) {
    return e.stderr;
  }
  assert.fail('helm template succeeded');
}

const one = (objs, kind, name) => {
  const found = objs.filter((o) => o.kind === kind && (!name || o.metadata.name === name));
  assert.equal(found.length, 1, `exactly one ${kind} ${name ?? ''}`);
  return found[0];
};
const podSpec = (objs) => one(objs, 'Deployment').spec.template.spec;
const lockdContainer = (objs) => podSpec(objs).containers.find((c) => c.name === 'lockd');
const configOf = (objs) => one(objs.filter((o) => !o.metadata.name.endsWith('-dashboard')), 'ConfigMap').data['lockd.yaml'];
const matches = (selector, labels) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);
const isTestHook = (o) => o.metadata.annotations?.['helm.sh/hook'] === 'test';

test('appVersion is the VERSION file at the repository root', () => {
  const chart = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'));
  const version = readFileSync(join(CHART, '..', '..', '..', 'VERSION'), 'utf8').trim();
  assert.equal(chart.appVersion, version);
});

test('helm lint --strict passes for the defaults and every ci values file', () => {
  helm(['lint', '--strict', CHART]);
  for (const f of CI_FILES) helm(['lint', '--strict', CHART, '-f', join(CHART, 'ci', f)]);
});

test('every rendered object is valid for the Kubernetes schemas, unknown fields rejected', () => {
  for (const kubeVersion of KUBE_VERSIONS) {
    for (const f of [null, ...CI_FILES]) {
      const objs = render({ values: f ? [f] : [], kubeVersion });
      assert.ok(objs.length >= 4, `${f}: rendered ${objs.length} objects`);
      const problems = objs.flatMap(validateObject);
      assert.deepEqual(problems, [], `${f ?? 'defaults'} on ${kubeVersion}`);
    }
  }
});

test('the schema check catches a misspelt field', () => {
  const deploy = one(render(), 'Deployment');
  deploy.spec.template.spec.containers[0].livenessProbe.grpc.prot = 7411;
  assert.deepEqual(validateObject(deploy), [
    'Deployment/rel-lockd: unknown field /spec/template/spec/containers/0/livenessProbe/grpc/prot',
  ]);
  delete deploy.spec.template.spec.containers[0].livenessProbe.grpc.prot;
  deploy.spec.template.spec.containers[0].livenessProbe.grpc.port = '7411';
  assert.equal(validateObject(deploy).length, 1, 'a string port is a schema error');
});

test('values.schema.json rejects unknown and malformed values', () => {
  assert.match(renderFails({ set: ['livenessProbe.prot=1'] }), /Additional property prot is not allowed/);
  assert.match(renderFails({ set: ['redis.adresses={a:1}'] }), /Additional property adresses/);
  assert.match(renderFails({ set: ['backend=etcd'] }), /backend/);
  assert.match(renderFails({ set: ['config.lease.default=30 seconds'] }), /lease/);
});

test('Kubernetes older than the chart supports is refused', () => {
  assert.match(renderFails({ kubeVersion: '1.24.0' }), /kubeVersion/);
});

test('the memory backend with more than one replica fails with the reason', () => {
  const err = renderFails({ set: ['backend=memory', 'replicaCount=2'] });
  assert.match(err, /backend memory keeps locks inside one pod/);
  assert.match(renderFails({ values: ['memory-values.yaml'], set: ['autoscaling.enabled=true'] }),
    /backend memory/);
  assert.equal(podSpec(render({ values: ['memory-values.yaml'] })).containers.length, 1);
});

test('probe ports are integers, on the health port when TLS is on', () => {
  for (const f of CI_FILES) {
    const objs = render({ values: [f] });
    const c = lockdContainer(objs);
    const tls = f === 'tls-values.yaml' || f === 'all-values.yaml';
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) {
      const port = c[probe].grpc.port;
      assert.ok(Number.isInteger(port), `${f} ${probe}: port ${JSON.stringify(port)}`);
      assert.equal(port, tls ? 7412 : 7411, `${f} ${probe}`);
      assert.ok(c.ports.some((p) => p.containerPort === port), `${f}: ${probe} port is declared`);
    }
    assert.equal(c.readinessProbe.grpc.service, 'lockd.v1.LockService');
    const config = parseYaml(configOf(objs));
    assert.equal(config.listen, '0.0.0.0:7411');
    if (tls) assert.equal(config.health.listen, '0.0.0.0:7412', f);
  }
});

test('readiness asks for lockd.v1.LockService, startup and liveness for the whole server', () => {
  // lockd.v1.LockService follows the backend; "" stays SERVING while lockd
  // answers (tests/integration/redis/redis_health_test.cc), so a backend
  // outage takes pods out of the Service without restarting them.
  for (const f of [null, ...CI_FILES]) {
    const c = lockdContainer(render({ values: f ? [f] : [] }));
    assert.equal(c.readinessProbe.grpc.service, 'lockd.v1.LockService', `${f} readinessProbe`);
    for (const probe of ['startupProbe', 'livenessProbe']) {
      assert.equal(c[probe].grpc.service ?? '', '', `${f} ${probe}`);
    }
  }
});

test('the config checksum changes with the configuration and only then', () => {
  const sum = (set) => one(render({ set }), 'Deployment').spec.template.metadata.annotations['checksum/config'];
  const base = sum([]);
  assert.match(base, /^[0-9a-f]{64}$/);
  assert.equal(sum([]), base);
  assert.notEqual(sum(['config.logLevel=debug']), base);
  assert.notEqual(sum(['redis.addresses={redis-other:6379}']), base);
  assert.equal(sum(['podLabels.team=x']), base, 'a pod label is not configuration');
});

test('the PDB and the Services select exactly the pods', () => {
  for (const f of CI_FILES) {
    const objs = render({ values: [f] });
    const deploy = one(objs, 'Deployment');
    const labels = deploy.spec.template.metadata.labels;
    assert.ok(matches(deploy.spec.selector.matchLabels, labels), `${f}: Deployment selector`);
    for (const pdb of objs.filter((o) => o.kind === 'PodDisruptionBudget')) {
      assert.ok(matches(pdb.spec.selector.matchLabels, labels), `${f}: PDB selector`);
    }
    for (const svc of objs.filter((o) => o.kind === 'Service')) {
      assert.ok(matches(svc.spec.selector, labels), `${f}: ${svc.metadata.name} selector`);
      const grpc = svc.spec.ports.find((p) => p.name === 'grpc');
      assert.deepEqual([grpc.port, grpc.targetPort, grpc.appProtocol], [7411, 'grpc', 'grpc']);
    }
  }
  const headless = one(render({ values: ['zookeeper-values.yaml'] }), 'Service', 'rel-lockd-headless');
  assert.equal(headless.spec.clusterIP, 'None');
});

test('passwords live in a Secret mounted as a file, never in the ConfigMap or the environment', () => {
  const cases = [
    ['redis-values.yaml', 's3cret-redis', 'redis', 'password_file', 'rel-lockd-credentials'],
    ['zookeeper-values.yaml', 'lockd:zk-secret', 'zookeeper', 'auth_file', 'rel-lockd-credentials'],
    ['all-values.yaml', 's3cret-mysql', 'mysql', 'password_file', 'rel-lockd-credentials'],
    ['mysql-values.yaml', null, 'mysql', 'password_file', 'mariadb-credentials'],
  ];
  for (const [f, secretValue, backend, key, secretName] of cases) {
    const objs = render({ values: [f] });
    const config = parseYaml(configOf(objs));
    const file = config[backend][key];
    assert.match(file, /^\/etc\/lockd\/secrets\//, f);
    const spec = podSpec(objs);
    const vol = spec.volumes.find((v) => v.name === 'secrets');
    assert.equal(vol.secret.secretName, secretName, f);
    assert.equal(`/etc/lockd/secrets/${vol.secret.items[0].path}`, file, f);
    const secrets = objs.filter((o) => o.kind === 'Secret');
    const everythingButSecrets = JSON.stringify(objs.filter((o) => o.kind !== 'Secret'));
    if (secretValue) {
      assert.equal(secrets.length, 1, f);
      assert.equal(Buffer.from(secrets[0].data[vol.secret.items[0].key], 'base64').toString(), secretValue);
      assert.ok(!everythingButSecrets.includes(secretValue), `${f}: the secret leaks`);
      assert.ok(!everythingButSecrets.includes(Buffer.from(secretValue).toString('base64')));
    } else {
      assert.equal(secrets.length, 0, `${f}: no Secret when an existing one is named`);
    }
  }
  assert.equal(render({ set: ['backend=redis'] }).filter((o) => o.kind === 'Secret').length, 0);
});

test('security contexts: non-root, read-only root, no capabilities, RuntimeDefault seccomp', () => {
  const objs = render();
  const pod = podSpec(objs);
  const c = lockdContainer(objs).securityContext;
  assert.equal(pod.securityContext.runAsNonRoot, true);
  assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
  assert.equal(c.readOnlyRootFilesystem, true);
  assert.equal(c.allowPrivilegeEscalation, false);
  assert.deepEqual(c.capabilities.drop, ['ALL']);
  assert.ok(Number.isInteger(c.runAsUser) && c.runAsUser > 0);
  assert.ok(pod.terminationGracePeriodSeconds > 5 + 5);
  assert.equal(one(objs, 'Deployment').spec.replicas, 2);
  assert.match(renderFails({ set: ['terminationGracePeriodSeconds=8'] }), /must exceed/);
});

test('optional objects appear only when asked for', () => {
  // What `helm install` creates: test hooks only run under `helm test`.
  const kinds = (objs) => objs.filter((o) => !isTestHook(o)).map((o) => o.kind).sort();
  assert.deepEqual(kinds(render()), ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service', 'ServiceAccount']);
  const all = render({ values: ['all-values.yaml'] });
  for (const k of ['HorizontalPodAutoscaler', 'NetworkPolicy', 'ServiceMonitor', 'PrometheusRule']) {
    assert.ok(kinds(all).includes(k), k);
  }
  assert.equal(all.filter((o) => o.kind === 'ConfigMap').length, 2, 'the configuration and the dashboard');
  assert.equal(one(all, 'Deployment').spec.replicas, undefined, 'the HPA owns the replica count');
  const np = one(all, 'NetworkPolicy');
  assert.deepEqual(np.spec.ingress[0].from[0].podSelector.matchLabels, { 'lockd-client': 'yes' });
  assert.deepEqual(np.spec.egress[1].ports, [{ port: 3306, protocol: 'TCP' }]);
  assert.match(renderFails({ set: ['metrics.serviceMonitor.enabled=true'] }), /need metrics.enabled/);
});

// `helm test`: the Pod running `lockctl verify` (templates/tests/verify-pod.yaml).
const verifyPod = (opts) => {
  const pods = render(opts).filter(isTestHook);
  assert.equal(pods.length, 1, 'one test hook');
  return pods[0];
};
const verifyArgs = (pod) => pod.spec.containers[0].args;

test('helm test runs lockctl verify on the release\'s Service: mutex, 20 s, no nemesis', () => {
  const objs = render();
  const pod = verifyPod();
  assert.equal(pod.kind, 'Pod');
  assert.equal(pod.metadata.name, 'rel-lockd-verify');
  assert.equal(pod.spec.restartPolicy, 'Never');
  assert.deepEqual(pod.spec.containers[0].command, ['/usr/bin/lockctl']);
  assert.deepEqual(verifyArgs(pod), ['verify', '--server=rel-lockd.locks.svc:7411',
    '--namespace=lockd-verify', '--duration=20s', '--workload=mutex', '--nemesis=none']);
  assert.equal(pod.spec.containers[0].image, lockdContainer(objs).image);
  assert.equal(pod.spec.securityContext.runAsNonRoot, true);
  assert.equal(pod.spec.containers[0].securityContext.readOnlyRootFilesystem, true);
  // No Service or PDB selects it (it would receive lockd's traffic, or count as a replica).
  for (const o of objs.filter((x) => x.kind === 'Service' || x.kind === 'PodDisruptionBudget')) {
    const selector = o.spec.selector.matchLabels ?? o.spec.selector;
    assert.ok(!matches(selector, pod.metadata.labels), `${o.kind} ${o.metadata.name} selects the test Pod`);
  }
  assert.deepEqual(verifyArgs(verifyPod({ set: ['tests.verify.duration=5s', 'service.port=7000',
    'tests.verify.namespace=ci-verify'] })).slice(1, 4),
  ['--server=rel-lockd.locks.svc:7000', '--namespace=ci-verify', '--duration=5s']);
  assert.equal(render({ set: ['tests.verify.enabled=false'] }).filter(isTestHook).length, 0);
  assert.match(renderFails({ set: ['tests.verify.duration=soon'] }), /duration/);
});

test('helm test connects with the chart\'s TLS settings and a bearer token when given', () => {
  // clientAuth require: the CA and the Secret's certificate as the client's.
  const required = verifyPod({ values: ['tls-values.yaml'] });
  assert.deepEqual(verifyArgs(required).slice(6), ['--tls-ca=/etc/lockd/tls/ca.crt',
    '--tls-cert=/etc/lockd/tls/tls.crt', '--tls-key=/etc/lockd/tls/tls.key']);
  assert.equal(required.spec.volumes.find((v) => v.name === 'tls').secret.secretName, 'lockd-tls');
  assert.ok(required.spec.containers[0].volumeMounts.some((m) => m.name === 'tls' && m.mountPath === '/etc/lockd/tls'));
  // clientAuth request: the CA only.
  const requested = verifyPod({ values: ['all-values.yaml'] });
  assert.deepEqual(verifyArgs(requested).filter((a) => a.startsWith('--tls')), ['--tls-ca=/etc/lockd/tls/ca.crt']);
  // A client certificate of its own, and another name to verify.
  const own = verifyPod({ values: ['all-values.yaml'],
    set: ['tests.verify.tlsSecret=verify-client', 'tests.verify.tlsServerName=lockd.example.com'] });
  assert.equal(own.spec.volumes.find((v) => v.name === 'tls').secret.secretName, 'verify-client');
  assert.deepEqual(verifyArgs(own).filter((a) => a.startsWith('--tls')), ['--tls-ca=/etc/lockd/tls/ca.crt',
    '--tls-cert=/etc/lockd/tls/tls.crt', '--tls-key=/etc/lockd/tls/tls.key', '--tls-server-name=lockd.example.com']);
  // Plaintext: no TLS flag, no TLS volume.
  const plain = verifyPod();
  assert.ok(!verifyArgs(plain).some((a) => a.startsWith('--tls')));
  assert.ok(!plain.spec.volumes.some((v) => v.name === 'tls'));

  const token = verifyPod({ set: ['tests.verify.authToken.existingSecret=verify-token'] });
  assert.ok(verifyArgs(token).includes('--auth-token-file=/etc/lockd/auth/token'));
  assert.deepEqual(token.spec.volumes.find((v) => v.name === 'auth').secret.items, [{ key: 'token', path: 'token' }]);
  assert.ok(!verifyArgs(plain).some((a) => a.startsWith('--auth-token-file')));
});

test('the NetworkPolicy admits the helm test Pod', () => {
  const objs = render({ values: ['all-values.yaml'] });
  const pod = objs.find(isTestHook);
  const from = one(objs, 'NetworkPolicy').spec.ingress[0].from[0].podSelector.matchLabels;
  assert.ok(matches(from, pod.metadata.labels), JSON.stringify(pod.metadata.labels));
  const defaults = render({ set: ['networkPolicy.enabled=true'] });
  assert.ok(matches(one(defaults, 'NetworkPolicy').spec.ingress[0].from[0].podSelector.matchLabels,
    defaults.find(isTestHook).metadata.labels));
});

// deploy/monitoring holds the rules and dashboard for a Prometheus and
// Grafana without the operator or the sidecar; the chart ships the same files.
const MONITORING = join(CHART, '..', '..', 'monitoring');

test('the PrometheusRule carries every alert of deploy/monitoring, which promtool checks and unit-tests as rendered', () => {
  const shipped = parseYaml(readFileSync(join(MONITORING, 'lockd-alerts.yaml'), 'utf8'));
  const want = shipped.groups.flatMap((g) => g.rules);
  assert.ok(want.length >= 6);
  const rule = one(render({ set: ['metrics.enabled=true', 'metrics.prometheusRule.enabled=true'] }), 'PrometheusRule');
  const rendered = rule.spec.groups.flatMap((g) => g.rules);
  for (const r of want) assert.deepEqual(rendered.find((x) => x.alert === r.alert), r, r.alert);
  assert.deepEqual(rendered.map((r) => r.alert).filter((a) => !want.some((w) => w.alert === a)),
    ['LockdDown', 'LockdAllReplicasDown']);

  const dir = mkdtempSync(join(tmpdir(), 'lockd-rules-'));
  try {
    writeFileSync(join(dir, 'rendered.yaml'), stringifyYaml({ groups: rule.spec.groups }));
    execFileSync('promtool', ['check', 'rules', join(dir, 'rendered.yaml')], { stdio: 'pipe' });
    // The rules' own unit tests, run against the rendered rules.
    const tests = parseYaml(readFileSync(join(MONITORING, 'lockd-alerts.test.yaml'), 'utf8'));
    tests.rule_files = ['rendered.yaml'];
    writeFileSync(join(dir, 'rendered.test.yaml'), stringifyYaml(tests));
    execFileSync('promtool', ['test', 'rules', 'rendered.test.yaml'], { cwd: dir, stdio: 'pipe' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the dashboard ConfigMap carries deploy/monitoring\'s dashboard with the Grafana sidecar\'s label', () => {
  const dashboards = (objs) => objs.filter((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-dashboard'));
  assert.equal(dashboards(render({ set: ['metrics.enabled=true'] })).length, 0, 'off by default');
  assert.equal(dashboards(render({ set: ['metrics.dashboard.enabled=true'] })).length, 0, 'needs metrics.enabled');
  const cm = dashboards(render({ set: ['metrics.enabled=true', 'metrics.dashboard.enabled=true',
    'metrics.dashboard.annotations.grafana_folder=locks'] }));
  assert.equal(cm.length, 1);
  assert.equal(cm[0].metadata.labels.grafana_dashboard, '1');
  assert.equal(cm[0].metadata.annotations.grafana_folder, 'locks');
  assert.deepEqual(JSON.parse(cm[0].data['lockd.json']),
    JSON.parse(readFileSync(join(MONITORING, 'lockd-dashboard.json'), 'utf8')));
});

// The install notes, rendered through a copy of the chart with one more
// template (helm template does not print NOTES.txt, helm install needs a cluster).
function renderNotes(set = []) {
  const dir = mkdtempSync(join(tmpdir(), 'lockd-notes-'));
  try {
    cpSync(CHART, join(dir, 'lockd'), { recursive: true });
    writeFileSync(join(dir, 'lockd', 'templates', 'zz-notes.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: {{ include "lockd.notes" . | quote }}\n');
    const args = ['template', 'locks', join(dir, 'lockd'), '--namespace', 'shop', '--show-only', 'templates/zz-notes.yaml'];
    for (const v of set) args.push('--set', v);
    return parseYaml(helm(args)).data.notes;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('NOTES.txt shows grpcurl through a port-forward to the release\'s Service', () => {
  const notes = renderNotes();
  assert.match(notes, /kubectl --namespace shop port-forward svc\/locks-lockd 7411:7411/);
  const calls = [...notes.matchAll(/^ {2}grpcurl -plaintext -d '([^']*)' 127\.0\.0\.1:7411 (\S+)$/gm)];
  assert.deepEqual(calls.map((m) => m[2]), ['grpc.health.v1.Health/Check',
    'lockd.v1.LockService/Acquire', 'lockd.v1.LockService/Release']);
  // The same requests as docs/kubernetes.md, which the kube play test sends.
  const guide = readFileSync(join(CHART, '..', '..', '..', 'docs', 'kubernetes.md'), 'utf8');
  for (const m of calls) assert.ok(guide.includes(`grpcurl -plaintext -d '${m[1]}' 127.0.0.1:7411 ${m[2]}`), m[0]);
  assert.match(notes, /exec deploy\/locks-lockd -- lockctl describe/);
  const tls = renderNotes(['tls.enabled=true', 'tls.existingSecret=t']);
  assert.doesNotMatch(tls, /grpcurl -plaintext/);
  assert.match(tls, /grpcurl -cacert ca.crt/);
});

test('the chart README documents every value of the schema', () => {
  const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
  const rows = readFileSync(join(CHART, 'README.md'), 'utf8').split('\n').filter((l) => l.startsWith('| `'));
  const missing = [];
  // A value is documented by a table row naming its parent and itself
  // (`redis.auth.password`, or `startupProbe` ... `.periodSeconds`).
  const walk = (props, parent) => {
    for (const [key, sub] of Object.entries(props)) {
      const path = parent ? `${parent}.${key}` : key;
      if (sub.properties) walk(sub.properties, path);
      else if (!rows.some((r) => r.includes(`\`${parent || key}`) && r.includes(key))) missing.push(path);
    }
  };
  walk(schema.properties, '');
  assert.deepEqual(missing.filter((p) => p !== 'global'), []);
});

// lockd --help lists every key this lockd knows; keys of the metrics/TLS
// groups exist only in lockd builds that have those features.
function lockdKeys() {
  const help = execFileSync(LOCKD, ['--help'], { encoding: 'utf8' });
  return new Set([...help.matchAll(/^ {2}--([a-z0-9_.]+) \[/gm)].map((m) => m[1]));
}

function flatten(obj, prefix = '', out = []) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v, key, out);
    else out.push(key);
  }
  return out;
}

// Runs lockd on `file` until it has parsed the configuration: it serves
// (not ready while it cannot reach the backend, whose host names only
// resolve in a cluster) or cannot start the backend. Returns lockd's output.
function runLockd(file) {
  return new Promise((resolve, reject) => {
    const p = spawn(LOCKD, [`--config=${file}`, '--listen=127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => p.kill('SIGTERM'), 20000);
    const onData = (d) => {
      out += d;
      if (/lockd serving on|cannot start backend/.test(out)) p.kill('SIGTERM');
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('error', reject);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

// Writes `text` (a rendered lockd.yaml) under `dir`, with the files it names
// (secrets, certificates: under /etc/lockd in the pod) made there too, and
// runs lockd on it. Returns lockd's output.
async function lockdOn(text, dir) {
  const local = text.replaceAll('/etc/lockd/', `${dir}/`);
  const config = parseYaml(local);
  for (const key of flatten(config)) {
    const value = key.split('.').reduce((o, p) => o[p], config);
    if (typeof value === 'string' && value.startsWith(dir)) {
      mkdirSync(dirname(value), { recursive: true });
      if (!existsSync(value)) writeFileSync(value, 'user:placeholder\n');
    }
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'lockd.yaml'), local);
  return (await runLockd(join(dir, 'lockd.yaml'))).out;
}

const REFUSED = /see lockd --help|unknown key|config file/;

test('lockd itself accepts the rendered configuration file', async (t) => {
  const known = lockdKeys();
  assert.ok(known.has('redis.password_file'), 'lockd --help lists its keys');
  const dir = mkdtempSync(join(tmpdir(), 'lockd-chart-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  // The check can fail: a key lockd does not know is refused.
  const bogus = configOf(render({ set: ['config.extra.redis.bogus_key=1'] }));
  assert.match(await lockdOn(bogus, join(dir, 'bogus')), /unknown key "redis.bogus_key"/);

  for (const f of CI_FILES) {
    const config = parseYaml(configOf(render({ values: [f] })));
    // Keys of the metrics/TLS/auth features exist only in lockd builds that
    // have them (lockd --help says): without them, the rest is checked.
    const later = flatten(config).filter((k) => !known.has(k) && /^(metrics|health|tls|auth)\./.test(k));
    for (const group of new Set(later.map((k) => k.split('.')[0]))) delete config[group];
    if (later.length) t.diagnostic(`${f}: checked without ${later.join(', ')}: this lockd lacks them`);
    assert.deepEqual(flatten(config).filter((k) => !known.has(k)), [], `${f}: keys lockd --help does not list`);

    const out = await lockdOn(stringifyYaml(config), join(dir, f));
    assert.doesNotMatch(out, REFUSED, `${f}: lockd refused its configuration:\n${out}`);
    // Past the configuration, lockd serves (unready: the backend's host
    // names resolve only in the cluster) or cannot start the backend. A
    // build with TLS may refuse the placeholder certificates instead; that
    // is not this check.
    if (!config.tls) assert.match(out, /lockd serving on|cannot start backend/, `${f}:\n${out}`);
  }
});
