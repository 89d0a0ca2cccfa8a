// Validates rendered Kubernetes objects offline against the Kubernetes API schemas shipped in the
// npm package kubernetes-models (compiled JSON-schema validators), and fails on field names the
// schema does not define, which those validators let through.
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

// Kubeflow's PyTorchJob is a CRD that kubernetes-models does not ship: its own fields are checked
// against the CRD's structure (kubeflow.org/v1), its metadata and pod templates against the core
// schemas.
const PYTORCHJOB_FIELDS = {
  '': ['apiVersion', 'kind', 'metadata', 'spec'],
  spec: ['runPolicy', 'pytorchReplicaSpecs', 'elasticPolicy', 'nprocPerNode'],
  runPolicy: ['cleanPodPolicy', 'ttlSecondsAfterFinished', 'activeDeadlineSeconds', 'backoffLimit',
    'schedulingPolicy', 'suspend', 'managedBy'],
  replica: ['replicas', 'template', 'restartPolicy'],
};

function checkFields(obj, allowed, where, problems) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    problems.push(`${where}: expected an object`);
    return;
  }
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) problems.push(`${where}/${key}: unknown field (not in PyTorchJob)`);
  }
}

function checkPyTorchJob(job, where) {
  const problems = [];
  checkFields(job, PYTORCHJOB_FIELDS[''], where, problems);
  problems.push(...check('IoK8sApimachineryPkgApisMetaV1ObjectMeta', job.metadata, where + '/metadata'));
  const spec = job.spec || {};
  checkFields(spec, PYTORCHJOB_FIELDS.spec, where + '/spec', problems);
  const runPolicy = spec.runPolicy || {};
  checkFields(runPolicy, PYTORCHJOB_FIELDS.runPolicy, where + '/spec/runPolicy', problems);
  if (runPolicy.cleanPodPolicy !== undefined && !['All', 'Running', 'None'].includes(runPolicy.cleanPodPolicy)) {
    problems.push(`${where}/spec/runPolicy/cleanPodPolicy: not All, Running or None`);
  }
  if (runPolicy.backoffLimit !== undefined && !Number.isInteger(runPolicy.backoffLimit)) {
    problems.push(`${where}/spec/runPolicy/backoffLimit: not an integer`);
  }
  const replicas = spec.pytorchReplicaSpecs || {};
  if (!replicas.Master) problems.push(`${where}/spec/pytorchReplicaSpecs: no Master`);
  for (const [type, rs] of Object.entries(replicas)) {
    const at = `${where}/spec/pytorchReplicaSpecs/${type}`;
    if (!['Master', 'Worker'].includes(type)) problems.push(`${at}: unknown replica type`);
    checkFields(rs, PYTORCHJOB_FIELDS.replica, at, problems);
    if (!Number.isInteger(rs.replicas) || rs.replicas < 1) problems.push(`${at}/replicas: not a positive integer`);
    if (!['Always', 'OnFailure', 'Never', 'ExitCode'].includes(rs.restartPolicy)) {
      problems.push(`${at}/restartPolicy: not Always, OnFailure, Never or ExitCode`);
    }
    problems.push(...check('IoK8sApiCoreV1PodTemplateSpec', rs.template, at + '/template'));
    const containers = (((rs.template || {}).spec || {}).containers || []).map((c) => c.name);
    if (!containers.includes('pytorch')) problems.push(`${at}: the operator needs a container named pytorch`);
  }
  return problems;
}

function checkObject(obj, where) {
  const id = `${where}:${obj.kind}/${(obj.metadata || {}).name}`;
  if (obj.apiVersion === 'kubeflow.org/v1' && obj.kind === 'PyTorchJob') return checkPyTorchJob(obj, id);
  const validator = VALIDATORS[`${obj.apiVersion}/${obj.kind}`];
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
