// Validates rendered Kubernetes objects offline against the Kubernetes API schemas shipped in the
// npm package kubernetes-models (compiled JSON-schema validators), and fails on field names the
// schema does not define, which those validators let through. Custom resources (PyTorchJob,
// TrainJob, ClusterTrainingRuntime, PodGroup) are checked against their CRDs' own schemas, copied
// under crds/, with the core types those CRDs embed going to the same validators (checkSchema).
//
// Usage: node validate.js FILE.json...   (each file: one object or an array of objects)
// Exit status 0 when every object is valid, 1 otherwise (one line per problem).
//
// Unknown fields: each validator reads every property its schema defines ("data.spec",
// "data.completions", ...) and enumerates the keys only of free-form maps (labels, limits).
// The objects are handed to the validator behind Proxies that record those reads, so a key that
// was never read in an object that was never enumerated is not in the schema: a misspelling.
'use strict';

const fs = require('fs');
const path = require('path');

// The generated validators are not in the package's export map; load them by file.
const SCHEMA_DIRS = [
  path.join(__dirname, 'node_modules/kubernetes-models/_schemas'),
  path.join(__dirname, 'node_modules/@kubernetes-models/apimachinery/_schemas'),
];

function schemaValidator(name) {
  for (const dir of SCHEMA_DIRS) {
    const file = path.join(dir, name + '.js');
    if (fs.existsSync(file)) return require(file).validate;
  }
  throw new Error('schema ' + name + ' not found: run scripts/install-deps.sh (npm install in tests/launch/k8s_schema)');
}

const VALIDATORS = {
  'v1/ConfigMap': 'IoK8sApiCoreV1ConfigMap',
  'v1/Service': 'IoK8sApiCoreV1Service',
  'v1/Secret': 'IoK8sApiCoreV1Secret',
  'apps/v1/Deployment': 'IoK8sApiAppsV1Deployment',
  'batch/v1/Job': 'IoK8sApiBatchV1Job',
  'networking.k8s.io/v1/NetworkPolicy': 'IoK8sApiNetworkingV1NetworkPolicy',
};

// Wraps `value` so that every property read and key enumeration is recorded in `log`.
function traced(value, where, log) {
  if (value === null || typeof value !== 'object') return value;
  const entry = { where, value, read: new Set(), enumerated: false };
  log.push(entry);
  const children = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      const v = Reflect.get(target, key, receiver);
      if (typeof key !== 'string') return v;
      entry.read.add(key);
      if (v === null || typeof v !== 'object') return v;
      if (!children.has(key)) children.set(key, traced(v, where + '/' + key, log));
      return children.get(key);
    },
    ownKeys(target) {
      entry.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

function unknownKeys(log) {
  const unknown = [];
  for (const e of log) {
    if (e.enumerated || Array.isArray(e.value)) continue;
    for (const key of Object.keys(e.value)) {
      if (!e.read.has(key)) unknown.push(e.where + '/' + key);
    }
  }
  return unknown;
}

// Runs one generated validator over `value`; returns problem strings prefixed with `where`.
function check(validatorName, value, where) {
  const validate = schemaValidator(validatorName);
  const log = [];
  const problems = [];
  if (!validate(traced(value, where, log))) {
    for (const e of validate.errors) {
      problems.push(`${where}${e.instancePath}: ${e.keyword} ${JSON.stringify(e.params)}`);
    }
  }
  for (const key of unknownKeys(log)) problems.push(`${key}: unknown field (not in ${validatorName})`);
  return problems;
}

// Custom resources (Kubeflow's PyTorchJob, Trainer's TrainJob and ClusterTrainingRuntime,
// Volcano's PodGroup) are checked against the openAPIV3Schema of their CRDs, copied under crds/
// (see crds/README.md: the core types those CRDs inline are markers there, checked with the
// validators above). Fields a schema does not define are errors: the API server prunes them.
const CRD_DIR = path.join(__dirname, 'crds');
const CORE_TYPE = 'x-chexscale-core-type';
const ELIDED = 'x-chexscale-elided';

// 'io.k8s.api.core.v1.PodSpec' -> 'IoK8sApiCoreV1PodSpec', the kubernetes-models validator.
const coreValidatorName = (openApiName) =>
  openApiName.split('.').map((part) => part[0].toUpperCase() + part.slice(1)).join('');

// The x-kubernetes-validations (CEL) rules the copied schemas contain, as JavaScript. A rule that is
// not here is reported, so a new schema copy cannot pass a rule unchecked.
const CEL_RULES = {
  // A transition rule: the API server evaluates it only on updates, and these objects are created.
  'self == oldSelf': () => true,
  "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']": (self) =>
    ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue'].includes(self),
  "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')": (self) =>
    /^[a-z]([-a-z0-9]*[a-z0-9])?$/.test((self.metadata || {}).name),
  'size(self.metadata.name) <= 63': (self) => String((self.metadata || {}).name).length <= 63,
  '[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1':
    (self) => ['torch', 'mpi', 'jax', 'xgboost', 'flux'].filter((k) => k in self).length <= 1,
  'self >= 1': (self) => self >= 1,
  'self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)': (self) =>
    (self.templates || []).every((t) => !((t.metadata || {}).namespace)),
  "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))":
    (self) => !(self.startupPolicy && self.startupPolicy.startupPolicyOrder === 'InOrder' &&
                (self.replicatedJobs || []).some((x) => 'dependsOn' in x)),
};

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function hasType(value, type) {
  switch (type) {
    case 'object': return isObject(value);
    case 'array': return Array.isArray(value);
    case 'string': return typeof value === 'string';
    case 'integer': return Number.isInteger(value);
    case 'number': return typeof value === 'number';
    case 'boolean': return typeof value === 'boolean';
    default: return false;
  }
}

const INT_RANGES = { int32: [-(2 ** 31), 2 ** 31 - 1], int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER] };
const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

// Checks `value` against a structural (Kubernetes CRD) schema; appends "<where>: ..." problems.
function checkSchema(value, schema, where, ctx) {
  const problem = (text) => ctx.problems.push(`${where}: ${text}`);
  if (schema[CORE_TYPE]) { ctx.problems.push(...check(coreValidatorName(schema[CORE_TYPE]), value, where)); return; }
  if (schema[ELIDED]) { problem(`not checked: elided from the copy of the ${ctx.kind} schema (${schema[ELIDED]})`); return; }
  if (value === null) { if (!schema.nullable) problem('null is not allowed'); return; }
  if (schema['x-kubernetes-int-or-string']) {
    if (!Number.isInteger(value) && typeof value !== 'string') { problem('type (expected integer or string)'); return; }
  } else if (schema.type && !hasType(value, schema.type)) {
    problem(`type (expected ${schema.type})`);
    return;
  }
  if (schema.enum && !schema.enum.includes(value)) problem(`not one of ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}`);
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) problem(`shorter than ${schema.minLength}`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) problem(`longer than ${schema.maxLength}`);
    if (schema.pattern && !new RegExp(schema.pattern).test(value)) problem(`does not match ${schema.pattern}`);
    if (schema.format === 'date-time' && !DATE_TIME.test(value)) problem('not an RFC 3339 date-time');
  }
  if (typeof value === 'number') {
    const range = INT_RANGES[schema.format];
    if (range && (value < range[0] || value > range[1])) problem(`out of ${schema.format} range`);
    if (schema.minimum !== undefined && value < schema.minimum) problem(`less than the minimum ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) problem(`more than the maximum ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) problem(`fewer than ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) problem(`more than ${schema.maxItems} items`);
    if (schema.items) value.forEach((item, i) => checkSchema(item, schema.items, `${where}/${i}`, ctx));
    const listType = schema['x-kubernetes-list-type'];
    if (listType === 'map' || listType === 'set') {
      const keys = listType === 'set' ? value.map((v) => JSON.stringify(v))
        : value.map((v) => JSON.stringify((schema['x-kubernetes-list-map-keys'] || []).map((k) => (v || {})[k])));
      if (new Set(keys).size !== keys.length) problem(`duplicate entries in a list of type ${listType}`);
    }
  } else if (isObject(value)) {
    const keys = Object.keys(value);
    if (schema.minProperties !== undefined && keys.length < schema.minProperties) problem(`fewer than ${schema.minProperties} fields`);
    for (const key of schema.required || []) if (!(key in value)) ctx.problems.push(`${where}/${key}: required`);
    const properties = schema.properties || {};
    for (const key of keys) {
      if (key in properties) {
        checkSchema(value[key], properties[key], `${where}/${key}`, ctx);
      } else if (isObject(schema.additionalProperties)) {
        checkSchema(value[key], schema.additionalProperties, `${where}/${key}`, ctx);
      } else if (!schema['x-kubernetes-preserve-unknown-fields']) {
        ctx.problems.push(`${where}/${key}: unknown field (not in ${ctx.kind})`);
      }
    }
  }
  for (const { rule, message } of schema['x-kubernetes-validations'] || []) {
    const evaluate = CEL_RULES[rule];
    if (!evaluate) problem(`x-kubernetes-validations rule not implemented in validate.js: ${rule}`);
    else if (!evaluate(value)) problem(message);
  }
}

// `${group}/${version}/${kind}` -> { kind, schema, clusterScoped } for each version in crds/*.yaml.
function loadCustomResourceDefinitions() {
  let YAML;
  try {
    YAML = require('yaml');
  } catch (e) {
    throw new Error('npm package yaml not found: run scripts/install-deps.sh (npm install in tests/launch/k8s_schema)');
  }
  const definitions = {};
  for (const file of fs.readdirSync(CRD_DIR).filter((f) => f.endsWith('.yaml'))) {
    const crd = YAML.parse(fs.readFileSync(path.join(CRD_DIR, file), 'utf8'));
    for (const version of crd.spec.versions) {
      const schema = version.schema.openAPIV3Schema;
      // The API server checks metadata as ObjectMeta, whatever the CRD declares for it.
      const metadata = { [CORE_TYPE]: 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' };
      definitions[`${crd.spec.group}/${version.name}/${crd.spec.names.kind}`] = {
        kind: crd.spec.names.kind,
        schema: { ...schema, properties: { ...schema.properties, metadata } },
        clusterScoped: crd.spec.scope === 'Cluster',
      };
    }
  }
  return definitions;
}

// What the operators need beyond the schema: the container and job names they look for.
function pytorchJobRules(job, where, problems) {
  const replicas = (job.spec || {}).pytorchReplicaSpecs || {};
  const elastic = (job.spec || {}).elasticPolicy !== undefined;
  if (!replicas.Master && !elastic) problems.push(`${where}/spec/pytorchReplicaSpecs: no Master`);
  for (const [type, rs] of Object.entries(replicas)) {
    const at = `${where}/spec/pytorchReplicaSpecs/${type}`;
    if (!['Master', 'Worker'].includes(type)) problems.push(`${at}: unknown replica type`);
    if (!Number.isInteger(rs.replicas) || rs.replicas < 1) problems.push(`${at}/replicas: not a positive integer`);
    const containers = (((rs.template || {}).spec || {}).containers || []).map((c) => c.name);
    if (!containers.includes('pytorch')) problems.push(`${at}: the operator needs a container named pytorch`);
  }
}

function trainingRuntimeRules(runtime, where, problems) {
  const jobs = ((((runtime.spec || {}).template || {}).spec || {}).replicatedJobs) || [];
  const node = jobs.find((j) => j.name === 'node');
  if (!node) { problems.push(`${where}: no replicated job named node (Trainer's torch plugin)`); return; }
  const labels = ((node.template || {}).metadata || {}).labels || {};
  if (labels['trainer.kubeflow.org/trainjob-ancestor-step'] !== 'trainer') {
    problems.push(`${where}: replicated job node lacks trainer.kubeflow.org/trainjob-ancestor-step: trainer`);
  }
  const pod = (((node.template || {}).spec || {}).template || {}).spec || {};
  if (!(pod.containers || []).some((c) => c.name === 'node')) {
    problems.push(`${where}: replicated job node has no container named node (it gets PET_*)`);
  }
}

// What each controller needs beyond its CRD's schema.
const CONTROLLER_RULES = {
  'kubeflow.org/v1/PyTorchJob': pytorchJobRules,
  'trainer.kubeflow.org/v1alpha1/ClusterTrainingRuntime': trainingRuntimeRules,
};

let customResourceDefinitions;

function checkCustomResource(crd, rules, obj, where) {
  const ctx = { kind: crd.kind, problems: [] };
  checkSchema(obj, crd.schema, where, ctx);
  if (crd.clusterScoped && (obj.metadata || {}).namespace !== undefined) {
    ctx.problems.push(`${where}/metadata/namespace: ${crd.kind} is cluster-scoped`);
  }
  if (rules) rules(obj, where, ctx.problems);
  return ctx.problems;
}

function checkObject(obj, where) {
  const id = `${where}:${obj.kind}/${(obj.metadata || {}).name}`;
  const type = `${obj.apiVersion}/${obj.kind}`;
  if (!customResourceDefinitions) customResourceDefinitions = loadCustomResourceDefinitions();
  const crd = customResourceDefinitions[type];
  if (crd) return checkCustomResource(crd, CONTROLLER_RULES[type], obj, id);
  const validator = VALIDATORS[type];
  if (!validator) return [`${id}: no schema for ${obj.apiVersion} ${obj.kind}`];
  return check(validator, obj, id);
}

function main(files) {
  if (files.length === 0) {
    console.error('usage: node validate.js FILE.json...');
    return 2;
  }
  let count = 0;
  const problems = [];
  for (const file of files) {
    const parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
    const objects = Array.isArray(parsed) ? parsed : [parsed];
    objects.forEach((obj, i) => {
      problems.push(...checkObject(obj, `${path.basename(file)}[${i}]`));
      count++;
    });
  }
  for (const p of problems) console.log('INVALID ' + p);
  console.log(`validated ${count} objects: ${problems.length} problem(s)`);
  return problems.length === 0 ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
