// Validates rendered Kubernetes objects against the official OpenAPI schemas
// (kubernetes-models, @kubernetes-models/prometheus-operator) and, beyond
// them, rejects fields the schemas do not define: the API server drops or
// refuses those, so a typo such as `livenessProbe.grpc.prot` would otherwise
// pass unnoticed.
//
// How unknown fields are found: the schema validators are compiled code that
// reads every property their schema defines (and iterates free-form maps
// such as labels). The object is validated through a Proxy that records each
// property read; an own property that was never read is unknown.

import * as core from 'kubernetes-models/v1';
import * as apps from 'kubernetes-models/apps/v1';
import * as policy from 'kubernetes-models/policy/v1';
import * as autoscaling from 'kubernetes-models/autoscaling/v2';
import * as networking from 'kubernetes-models/networking.k8s.io/v1';
import * as monitoring from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';

const MODELS = {
  v1: core,
  'apps/v1': apps,
  'policy/v1': policy,
  'autoscaling/v2': autoscaling,
  'networking.k8s.io/v1': networking,
  'monitoring.coreos.com/v1': monitoring,
};

function tracked(value, path, seen) {
  if (value === null || typeof value !== 'object') return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      const child = `${path}/${String(key)}`;
      if (typeof key === 'string') seen.add(child);
      return tracked(Reflect.get(target, key, receiver), child, seen);
    },
    has(target, key) {
      if (typeof key === 'string') seen.add(`${path}/${key}`);
      return Reflect.has(target, key);
    },
  });
}

function unreadFields(value, path, seen, out) {
  if (value === null || typeof value !== 'object') return out;
  for (const key of Object.keys(value)) {
    const child = `${path}/${key}`;
    if (seen.has(child)) unreadFields(value[key], child, seen, out);
    else out.push(child);
  }
  return out;
}

// Returns a list of problems (empty when the object is valid): schema errors
// and unknown fields, each naming the object and the JSON path.
export function validateObject(obj) {
  const what = `${obj?.kind}/${obj?.metadata?.name}`;
  const group = MODELS[obj?.apiVersion];
  const model = group?.[obj?.kind];
  if (!model) return [`${what}: no schema for ${obj?.apiVersion} ${obj?.kind}`];
  const problems = [];
  const seen = new Set();
  try {
    model.prototype.validate.call(tracked(obj, '', seen));
  } catch (e) {
    problems.push(`${what}: ${e.message}`);
  }
  for (const field of unreadFields(obj, '', seen, [])) {
    problems.push(`${what}: unknown field ${field}`);
  }
  return problems;
}
