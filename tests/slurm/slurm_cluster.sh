# A private single-node Slurm cluster for tests, sourced by the Slurm test scripts: munged,
# slurmctld and slurmd (Debian's slurm-wlm and munge) run as root with their own key, sockets,
# configuration, spool and free ports in one folder, so nothing under /etc is read or written and
# several clusters can run at once. slurm_cluster_start DIR CPUS [BINDING] starts it and exports
# SLURM_CONF; slurm_cluster_stop stops every daemon it started (call it from an EXIT trap).
# shellcheck shell=bash

CLUSTER_PIDS=()

# A TCP port that is free now (the kernel's choice for port 0).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# port_free PORT: nothing listens on or is bound to PORT now.
port_free() {
  python3 -c 'import socket, sys; socket.socket().bind(("", int(sys.argv[1])))' "$1" 2>/dev/null
}

# Starts one daemon in the foreground mode, in the background, logging to DIR/log/NAME.out.
start_daemon() {
  local name=$1
  shift
  "$@" >"$CLUSTER_DIR/log/$name.out" 2>&1 &
  CLUSTER_PIDS+=($!)
}

# slurm_cluster_start DIR CPUS [BINDING]: partition "test" (the default) is a node named after
# this host with CPUS CPUs (more than the host has is allowed: the node's configuration is taken
# as given). BINDING "cores" binds each task to its CPUs (task/affinity, as many sites do; CPUS
# must then be the host's); by default tasks are not bound (task/none). Partition "gpu" has two
# nodes of 32 CPUs and 4 GPUs that never start (State=FUTURE): jobs of that shape are accepted
# and wait there, so `sbatch --hold` shows how Slurm reads a GPU batch script. Job ids start at
# FIRST_JOB_ID (default 1).
slurm_cluster_start() {
  CLUSTER_DIR=$1
  local cpus=$2 binding=${3:-none}
  local dir=$CLUSTER_DIR node task_plugin="TaskPlugin=task/none"
  node=$(hostname -s)
  if [ "$binding" = cores ]; then
    task_plugin=$'TaskPlugin=task/affinity\nTaskPluginParam=Cores'
  fi
  # A job of an enclosing Slurm allocation (a CI job) must not leak into this cluster's commands.
  unset "${!SLURM_@}"
  local tool
  for tool in munged mungekey slurmctld slurmd srun sbatch scontrol; do
    command -v "$tool" >/dev/null ||
      { echo "FAIL: $tool is missing: install slurm-wlm and munge (scripts/install-deps.sh)"; return 1; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "FAIL: the Slurm daemons of the test cluster run as root"; return 1; }
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
  chmod 700 "$dir/munge"
  : >"$dir/plugstack.conf"

  mungekey --create --keyfile="$dir/munge/munge.key"
  start_daemon munged munged --foreground --force --socket="$dir/munge/socket" \
    --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"
  wait_for "munged's socket" test -S "$dir/munge/socket"

  # A requeued job may start again after cred_expire + 1 s (default 120), at the next scheduling
  # pass (sched_interval, default 60 s): both short here.
  cat >"$dir/slurm.conf" <<EOF
ClusterName=chexscale-test
SlurmctldHost=$node
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
MailProg=/bin/true
FirstJobId=${FIRST_JOB_ID:-1}
PlugStackConfig=$dir/plugstack.conf
MpiDefault=none
ProctrackType=proctrack/linuxproc
$task_plugin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
NodeName=$node CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
GresTypes=gpu
NodeName=gpu[1-2] CPUs=32 Gres=gpu:4 RealMemory=1000 State=FUTURE
PartitionName=gpu Nodes=gpu[1-2] MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  start_daemon slurmctld slurmctld -D -f "$SLURM_CONF"
  start_daemon slurmd slurmd -D -f "$SLURM_CONF"
  wait_for "node $node idle" node_idle "$node"
}

node_idle() {
  sinfo --noheader --nodes="$1" --format=%T 2>/dev/null | grep -qx idle
}

# wait_for WHAT COMMAND...: polls COMMAND for up to 30 s.
wait_for() {
  local what=$1
  shift
  for _ in $(seq 300); do
    "$@" && return 0
    sleep 0.1
  done
  echo "FAIL: $what not ready within 30 s; daemon output:" >&2
  tail -n 20 "$CLUSTER_DIR"/log/*.out >&2 || true
  return 1
}

# Cancels what still runs, then stops the daemons (slurmd first, munged last), each with SIGTERM
# and after 10 s SIGKILL, and waits for each to exit.
slurm_cluster_stop() {
  local i pid
  if [ ${#CLUSTER_PIDS[@]} -eq 3 ]; then
    scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do
      [ -z "$(squeue --noheader 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  for ((i = ${#CLUSTER_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${CLUSTER_PIDS[i]}
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  CLUSTER_PIDS=()
}
