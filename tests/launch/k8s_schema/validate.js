// Validates rendered Kubernetes objects offline against the Kubernetes API schemas shipped in the
// npm package kubernetes-models (compiled JSON-schema validators), and fails on field names the
// schema does not define, which those validators let through. Custom resources (PyTorchJob,
// TrainJob, ClusterTrainingRuntime, PodGroup) are checked against shapes taken from their CRDs,
// with the core parts they embed going to the same validators (see CUSTOM_RESOURCES below).
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

// Custom resources that kubernetes-models does not ship (Kubeflow's PyTorchJob, Trainer's TrainJob
// and ClusterTrainingRuntime, Volcano's PodGroup) are checked against shapes written from their
// CRDs' openAPIV3Schema: the fields each defines where chexscale renders, with their types, unknown
// fields reported as misspellings (what the API server's strict field validation rejects).
// Subtrees the CRDs embed from the core API (ObjectMeta, PodTemplateSpec, JobSpec, EnvVar) go to
// the kubernetes-models validators; ANY marks a subtree chexscale never renders.
const STR = 'string';
const INT = 'integer';
const BOOL = 'boolean';
const STR_MAP = 'string-map';
const QUANTITIES = 'quantities';
const ANY = 'any';
const fields = (props, required = []) => ({ props, required });
const listOf = (items) => ({ items });
const mapOf = (values) => ({ values });
const core = (name) => ({ core: name });
const oneOf = (...values) => ({ values_in: values });
const META = core('IoK8sApimachineryPkgApisMetaV1ObjectMeta');
const POD_TEMPLATE = core('IoK8sApiCoreV1PodTemplateSpec');

// kubeflow.org/v1 PyTorchJob (kubeflow.org_pytorchjobs.yaml).
const PYTORCH_REPLICA = fields({
  replicas: INT,
  template: POD_TEMPLATE,
  restartPolicy: oneOf('Always', 'OnFailure', 'Never', 'ExitCode'),
});
const PYTORCHJOB = fields({
  apiVersion: STR, kind: STR, metadata: META,
  spec: fields({
    runPolicy: fields({
      cleanPodPolicy: oneOf('All', 'Running', 'None'),
      ttlSecondsAfterFinished: INT, activeDeadlineSeconds: INT, backoffLimit: INT,
      schedulingPolicy: fields({
        minAvailable: INT, queue: STR, minResources: QUANTITIES, priorityClass: STR,
        scheduleTimeoutSeconds: INT,
      }),
      suspend: BOOL, managedBy: STR,
    }),
    pytorchReplicaSpecs: mapOf(PYTORCH_REPLICA),
    elasticPolicy: fields({
      minReplicas: INT, maxReplicas: INT, rdzvBackend: STR, rdzvPort: INT, rdzvHost: STR,
      rdzvId: STR, rdzvConf: ANY, standalone: BOOL, nProcPerNode: INT, maxRestarts: INT,
      metrics: ANY,
    }),
    nprocPerNode: STR,
  }, ['pytorchReplicaSpecs', 'runPolicy']),
}, ['spec']);

// trainer.kubeflow.org/v1alpha1 TrainJob (trainer.kubeflow.org_trainjobs.yaml).
const TRAINJOB = fields({
  apiVersion: STR, kind: STR, metadata: META,
  spec: fields({
    runtimeRef: fields({ name: STR, apiGroup: STR, kind: oneOf('ClusterTrainingRuntime', 'TrainingRuntime') }, ['name']),
    initializer: ANY,
    trainer: fields({
      image: STR, command: listOf(STR), args: listOf(STR), env: listOf(core('IoK8sApiCoreV1EnvVar')),
      numNodes: INT, numProcPerNode: INT, resourcesPerNode: core('IoK8sApiCoreV1ResourceRequirements'),
    }),
    labels: STR_MAP, annotations: STR_MAP, podTemplateOverrides: ANY, runtimePatches: ANY,
    suspend: BOOL, managedBy: STR, activeDeadlineSeconds: INT,
  }, ['runtimeRef']),
}, ['spec']);

// The JobSet (jobset.x-k8s.io) spec that trainer.kubeflow.org_clustertrainingruntimes.yaml embeds.
const TEMPLATE_META = fields({ labels: STR_MAP, annotations: STR_MAP });
const JOBSET_SPEC = fields({
  replicatedJobs: listOf(fields({
    name: STR, groupName: STR, replicas: INT, dependsOn: ANY,
    template: fields({ metadata: TEMPLATE_META, spec: core('IoK8sApiBatchV1JobSpec') }, ['spec']),
  }, ['name', 'template'])),
  network: fields({ enableDNSHostnames: BOOL, subdomain: STR, publishNotReadyAddresses: BOOL }),
  failurePolicy: fields({ maxRestarts: INT, restartStrategy: oneOf('Recreate', 'BlockingRecreate', 'InPlaceRestart'), rules: ANY }),
  successPolicy: ANY, startupPolicy: ANY, coordinator: ANY, suspend: BOOL, managedBy: STR,
  ttlSecondsAfterFinished: INT,
});
const CLUSTER_TRAINING_RUNTIME = fields({
  apiVersion: STR, kind: STR, metadata: META,
  spec: fields({
    mlPolicy: fields({
      numNodes: INT,
      torch: fields({ envInjection: ANY }),  // numProcPerNode moved to the TrainJob's trainer
      mpi: ANY, jax: ANY, xgboost: ANY, flux: ANY,
    }),
    podGroupPolicy: fields({
      coscheduling: fields({ scheduleTimeoutSeconds: INT }),
      volcano: fields({ networkTopology: ANY }),
    }),
    template: fields({ metadata: TEMPLATE_META, spec: JOBSET_SPEC }),
  }, ['template']),
}, ['spec']);

// scheduling.volcano.sh/v1beta1 PodGroup (scheduling.volcano.sh_podgroups.yaml).
const PODGROUP = fields({
  apiVersion: STR, kind: STR, metadata: META,
  spec: fields({
    minMember: INT, minResources: QUANTITIES, minTaskMember: mapOf(INT), queue: STR,
    priorityClassName: STR, networkTopology: ANY, preemptable: BOOL,
  }),
}, ['spec']);

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// Checks `value` against `shape`; appends problem strings ("<where>: ...") to `problems`.
function checkShape(value, shape, where, kind, problems) {
  const typeProblem = (expected) => problems.push(`${where}: type (expected ${expected})`);
  if (shape === ANY) return;
  if (shape === STR) { if (typeof value !== 'string') typeProblem('string'); return; }
  if (shape === INT) { if (!Number.isInteger(value)) typeProblem('integer'); return; }
  if (shape === BOOL) { if (typeof value !== 'boolean') typeProblem('boolean'); return; }
  if (shape === STR_MAP || shape === QUANTITIES) {
    if (!isObject(value)) { typeProblem('object'); return; }
    for (const [k, v] of Object.entries(value)) {
      const ok = typeof v === 'string' || (shape === QUANTITIES && Number.isInteger(v));
      if (!ok) problems.push(`${where}/${k}: type (expected ${shape === STR_MAP ? 'string' : 'a quantity'})`);
    }
    return;
  }
  if (shape.core) { problems.push(...check(shape.core, value, where)); return; }
  if (shape.values_in) {
    if (!shape.values_in.includes(value)) problems.push(`${where}: not one of ${shape.values_in.join(', ')}`);
    return;
  }
  if (shape.items) {
    if (!Array.isArray(value)) { typeProblem('array'); return; }
    value.forEach((item, i) => checkShape(item, shape.items, `${where}/${i}`, kind, problems));
    return;
  }
  if (!isObject(value)) { typeProblem('object'); return; }
  if (shape.values) {
    for (const [k, v] of Object.entries(value)) checkShape(v, shape.values, `${where}/${k}`, kind, problems);
    return;
  }
  for (const key of shape.required) {
    if (value[key] === undefined) problems.push(`${where}/${key}: required`);
  }
  for (const [key, v] of Object.entries(value)) {
    if (!(key in shape.props)) {
      problems.push(`${where}/${key}: unknown field (not in ${kind})`);
    } else {
      checkShape(v, shape.props[key], `${where}/${key}`, kind, problems);
    }
  }
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

const CUSTOM_RESOURCES = {
  'kubeflow.org/v1/PyTorchJob': { shape: PYTORCHJOB, rules: pytorchJobRules },
  'trainer.kubeflow.org/v1alpha1/TrainJob': { shape: TRAINJOB },
  'trainer.kubeflow.org/v1alpha1/ClusterTrainingRuntime': {
    shape: CLUSTER_TRAINING_RUNTIME, rules: trainingRuntimeRules, clusterScoped: true,
  },
  'scheduling.volcano.sh/v1beta1/PodGroup': { shape: PODGROUP },
};

function checkCustomResource(cr, obj, where) {
  const problems = [];
  checkShape(obj, cr.shape, where, obj.kind, problems);
  if (cr.clusterScoped && (obj.metadata || {}).namespace !== undefined) {
    problems.push(`${where}/metadata/namespace: ${obj.kind} is cluster-scoped`);
  }
  if (cr.rules) cr.rules(obj, where, problems);
  return problems;
}

function checkObject(obj, where) {
  const id = `${where}:${obj.kind}/${(obj.metadata || {}).name}`;
  const cr = CUSTOM_RESOURCES[`${obj.apiVersion}/${obj.kind}`];
  if (cr) return checkCustomResource(cr, obj, id);
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
