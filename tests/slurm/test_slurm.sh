#!/usr/bin/env bash
# chexscale under a real single-node Slurm (a private cluster from slurm_cluster.sh, stopped at
# exit). Usage: test_slurm.sh CHEXSCALE_BIN SOURCE_DIR CASE, where CASE is
#   bench     `srun -n 2 chexscale bench`: both ranks join from Slurm's variables, one result;
#   sbatch    deploy/slurm/chexscale-train.sbatch as written, held: `scontrol show job` shows
#             what it asks (2 nodes x 4 tasks x 8 CPUs, 4 GPUs per node); then less its GPU line
#             on 1 node x 2 tasks with a tiny model, to completion: the job shows the script's
#             resources with those two changes, the run holds a 2-rank checkpoint and an
#             evaluated epoch;
#   binding   the script where Slurm binds tasks to cores: a worker gets its --cpus-per-task
#             CPUs (LAUNCH=tasks), a per-node launcher those of all its workers (LAUNCH=per-node,
#             which also starts one launcher for 2 workers and trains to completion);
#   requeue   the CPU variant for 4 epochs, requeued (`scontrol requeue`, as after a node failure
#             or preemption) once it has a checkpoint: the same job id, RUN and log continue,
#             the second attempt resumes from the checkpoint the first one wrote on Slurm's
#             SIGTERM (or that one) and finishes;
#   preempt   the CPU variant for 2 epochs, uninterrupted; then again, SIGUSR1 to its batch
#             shell alone (`scancel --signal=USR1 --batch`, as --signal=B:USR1@N does) once it
#             has a checkpoint: every rank stops at one step with a checkpoint, the script
#             requeues the job (Restarts=1), the next attempt resumes there and ends with final
#             checkpoints byte-identical to the uninterrupted run's;
#   killed    an srun step in which task 1 is SIGKILLed while training: the step ends non-zero,
#             srun and the surviving rank name rank 1, with and without --kill-on-bad-exit.
#   mpi       `srun -n 2 --mpi=pmix chexscale bench --backend mpi`: OpenMPI gets its ranks from
#             Slurm's PMIx plugin; one 2-rank result over the mpi backend.
# Prints a PASS line per check; the first failed check prints FAIL and exits 1.
set -euo pipefail

bin=$(realpath "$1")
source_dir=$(realpath "$2")
case_name=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$here/slurm_cluster.sh"
unset MASTER_ADDR RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE

work=$(mktemp -d "${TMPDIR:-/tmp}/chexscale-slurm-$case_name.XXXXXX")
cleanup() {
  local rc=$?
  slurm_cluster_stop
  if [ "$rc" -eq 0 ]; then rm -rf "$work"; else echo "files kept in $work"; fi
}
trap cleanup EXIT

pass() { echo "PASS: $*"; }
fail() {
  echo "FAIL: $*"
  exit 1
}
# expect_in FILE TEXT WHAT: FILE contains TEXT (a fixed string).
expect_in() {
  grep -qF -- "$2" "$1" || {
    echo "--- $1:"
    tail -n 40 "$1"
    fail "$3: '$2' not in $1"
  }
  pass "$3"
}
# expect_eq ACTUAL EXPECTED WHAT
expect_eq() {
  [ "$1" = "$2" ] || fail "$3: got '$1', expected '$2'"
  pass "$3 ($1)"
}

script=$source_dir/deploy/slurm/chexscale-train.sbatch
node=$(hostname -s)
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # (nproc obeys OMP_NUM_THREADS)
tiny_bench=(--arch resnet18 --image-size 32 --batch-size 2 --warmup-steps 1 --threads 1)
# The settings of a tiny training job through the batch script: environment and arguments.
tiny_train_env=(CHEXSCALE_ARCH=resnet18 CHEXSCALE_BATCH_SIZE=8 CHEXSCALE_IMAGE_SIZE=64
  CHEXSCALE_INTRA_OP_THREADS=1)
tiny_train_args=(--crop-size 56 --epochs 1 --loader-threads 1 --val-threads 1)

# The batch script less its GPU request, in FOLDER/cpu.sbatch; jobs run in FOLDER.
cpu_variant() {
  mkdir -p "$1"
  sed '/^#SBATCH --gpus-per-node=/d' "$script" >"$1/cpu.sbatch"
  expect_eq "$(diff "$script" "$1/cpu.sbatch" | grep -c '^<')" 1 \
    "CPU variant: the batch script less its --gpus-per-node line"
}

synth_data() {
  "$bin" synth --out "$work/data" --images 64 --size 64 --threads 2 >"$work/synth.log" 2>&1 ||
    fail "chexscale synth: $(cat "$work/synth.log")"
}

# submit_job WHAT [VAR=VALUE...] -- SBATCH ARGUMENTS...: submits from the current folder with
# the variables set; leaves the job's id in $job.
submit_job() {
  local what=$1 vars=()
  shift
  while [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  shift
  job=$(env "${vars[@]}" sbatch --parsable "$@") || fail "$what: sbatch refused the job"
  submitted=$SECONDS
}

# wait_job WHAT: waits up to 120 s for $job to end, checks it completed with status 0 and leaves
# `scontrol show job` in $work/job-$job.txt.
wait_job() {
  local state=""
  for _ in $(seq 1200); do
    state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z_]*')
    case $state in JobState=PENDING | JobState=RUNNING | JobState=COMPLETING | \
      JobState=CONFIGURING | JobState=REQUEUED) ;; *) break ;; esac
    sleep 0.1
  done
  scontrol show job "$job" >"$work/job-$job.txt"
  [ "$state" = JobState=COMPLETED ] || {
    cat "$work/job-$job.txt" "chexscale-$job.out" || true
    fail "$1: job $job did not complete: $state (after $((SECONDS - submitted)) s, 120 s at most)"
  }
  expect_in "$work/job-$job.txt" "ExitCode=0:0" "$1: job $job completed in $((SECONDS - submitted)) s"
}

# submit WHAT [VAR=VALUE...] -- SBATCH ARGUMENTS...: submit_job, then wait_job.
submit() {
  submit_job "$@"
  wait_job "$1"
}

# expect_trained RUN WORLD WHAT: RUN holds the checkpoint of one epoch by WORLD ranks.
expect_trained() {
  local best=$1/checkpoints/best.json
  [ -f "$best" ] || fail "$3: no checkpoint $best"
  expect_eq "$(jq -r .state.world_size "$best")" "$2" "$3: checkpoint written by $2 rank(s)"
  expect_eq "$(jq -r .state.epoch "$best")" 1 "$3: checkpoint after epoch 1"
  expect_eq "$(jq -s '[.[] | select(.type == "epoch") | .val_auroc.mean | numbers] | length' \
    "$1/metrics.jsonl")" 1 "$3: metrics.jsonl has one evaluated epoch"
}

# The node: 2 tasks x 8 CPUs for the batch script's --cpus-per-task=8 as written (more than this
# host has; tasks are not bound then); with core binding, this host's CPUs.
if [ "$case_name" = binding ]; then
  [ "$cpus" -ge 2 ] || fail "the binding case needs 2 CPUs or more (this host has $cpus)"
  slurm_cluster_start "$work/cluster" "$cpus" cores
elif [ "$case_name" = sbatch ]; then
  # The job here that trains (the second) takes the batch script's own MASTER_PORT, 20000 + job
  # id mod 12000: the ids start where that port is free.
  for _ in $(seq 100); do
    FIRST_JOB_ID=$((RANDOM % 12000 + 1000))
    script_port=$((20000 + (FIRST_JOB_ID + 1) % 12000))
    port_free "$script_port" && break
  done
  slurm_cluster_start "$work/cluster" 16
else
  slurm_cluster_start "$work/cluster" 16
fi
pass "single-node Slurm up: $(sinfo --version), node $node, SLURM_CONF=$SLURM_CONF"
export MASTER_PORT
MASTER_PORT=$(free_port)

case "$case_name" in
bench)
  start=$SECONDS
  srun -n 2 "$bin" bench "${tiny_bench[@]}" --steps 3 --out "$work/bench" >"$work/bench.log" 2>&1 ||
    fail "srun -n 2 chexscale bench exited $? ($(tail -n 5 "$work/bench.log"))"
  pass "srun -n 2 chexscale bench exited 0 in $((SECONDS - start)) s"
  for r in 0 1; do
    expect_in "$work/bench.log" "joining as rank $r of 2 (local $r of 2, Slurm convention) through \
the store at $node:$MASTER_PORT" "rank $r joined from SLURM_PROCID, store on the step's first node"
  done
  json=$work/bench/bench.json
  expect_eq "$(jq -r .world_size "$json")" 2 "bench.json world size"
  expect_eq "$(jq -r .nnodes "$json")" 1 "bench.json node count"
  expect_eq "$(jq -c '[.per_rank[].rank]' "$json")" "[0,1]" "bench.json per-rank results"
  expect_eq "$(jq -r '.images_per_sec > 0' "$json")" true "bench.json throughput measured"
  ;;

sbatch)
  # The script as written, held in the partition of GPU nodes that never start.
  mkdir -p "$work/held"
  cd "$work/held"
  held=$(sbatch --parsable --hold --partition=gpu "$script") || fail "sbatch refused the script as written"
  scontrol show job "$held" >"$work/held.txt"
  for field in "JobName=chexscale" "NumNodes=2-2 " "NumCPUs=64 " "NumTasks=8 " "CPUs/Task=8 " \
    "NtasksPerN:B:S:C=4:" "TresPerNode=gres:gpu:4" "TimeLimit=12:00:00" \
    "StdOut=$work/held/chexscale-$held.out"; do
    expect_in "$work/held.txt" "$field" "the script as written: scontrol show job: $field"
  done
  scancel "$held"

  cpu_variant "$work/job"
  synth_data
  cd "$work/job"
  unset MASTER_PORT
  submit "1 node x 2 tasks" PATH="$(dirname "$bin"):$PATH" DATA="$work/data" "${tiny_train_env[@]}" \
    -- --nodes=1 --ntasks-per-node=2 cpu.sbatch "${tiny_train_args[@]}"
  expect_eq "$((20000 + job % 12000))" "$script_port" "job $job: the port the test made sure is free"
  for field in "JobName=chexscale" "NumNodes=1 " "NumCPUs=16 " "NumTasks=2 " "CPUs/Task=8 " \
    "NtasksPerN:B:S:C=2:" "TimeLimit=12:00:00" "StdOut=$work/job/chexscale-$job.out"; do
    expect_in "$work/job-$job.txt" "$field" "scontrol show job: $field"
  done
  log=$work/job/chexscale-$job.out
  for r in 0 1; do
    expect_in "$log" "joining as rank $r of 2 (local $r of 2, Slurm convention) through the store \
at $node:$script_port" "job log: rank $r joined at the script's port for job $job"
  done
  run=$work/job/runs/chexnet-$job
  expect_in "$run/config.yaml" "arch: resnet18  # env" "run in RUN's default folder, model from the environment"
  expect_in "$run/config.yaml" "collective-timeout: 600  # flag" "the script's own train flags"
  expect_in "$run/config.yaml" "crop-size: 56  # flag" "the arguments after the script's name"
  expect_trained "$run" 2 "1 node x 2 tasks"
  ;;

binding)
  cpu_variant "$work/job"
  synth_data
  # A `chexscale` ahead of the real one in PATH records where Slurm let each process run.
  mkdir "$work/bin"
  cat >"$work/bin/chexscale" <<EOF
#!/bin/bash
echo "\$1 task \$SLURM_PROCID cpus \$(grep -Po 'Cpus_allowed_list:\\s*\\K.*' /proc/self/status) \
threads \$OMP_NUM_THREADS" >>"$work/affinity.txt"
exec "$bin" "\$@"
EOF
  chmod +x "$work/bin/chexscale"
  all_cpus="0-$((cpus - 1))"
  cd "$work/job"

  submit "LAUNCH=tasks, 1 task x $cpus CPUs" PATH="$work/bin:$PATH" DATA="$work/data" \
    RUN="$work/run-tasks" "${tiny_train_env[@]}" \
    -- --nodes=1 --ntasks-per-node=1 --cpus-per-task="$cpus" cpu.sbatch "${tiny_train_args[@]}"
  expect_eq "$(cat "$work/affinity.txt")" "train task 0 cpus $all_cpus threads $cpus" \
    "LAUNCH=tasks: the worker may run on its $cpus CPUs"
  expect_trained "$work/run-tasks" 1 "LAUNCH=tasks"

  rm "$work/affinity.txt"
  submit "LAUNCH=per-node, 1 node x 2 tasks" PATH="$work/bin:$PATH" DATA="$work/data" \
    RUN="$work/run-per-node" LAUNCH=per-node "${tiny_train_env[@]}" \
    -- --nodes=1 --ntasks-per-node=2 --cpus-per-task=$((cpus / 2)) cpu.sbatch "${tiny_train_args[@]}"
  expect_eq "$(grep -c '^launch ' "$work/affinity.txt")" 1 "LAUNCH=per-node: one launcher"
  expect_eq "$(grep '^launch ' "$work/affinity.txt")" \
    "launch task 0 cpus $all_cpus threads $((cpus / 2))" \
    "LAUNCH=per-node: the launcher may run on the CPUs of both its workers"
  log=$work/job/chexscale-$job.out
  expect_in "$log" "chexscale launch: starting 2 worker(s), ranks 0..1 of 2" \
    "LAUNCH=per-node: the launcher started both workers"
  expect_in "$log" "[rank 1] " "LAUNCH=per-node: rank-prefixed output"
  expect_trained "$work/run-per-node" 2 "LAUNCH=per-node"
  ;;

requeue)
  cpu_variant "$work/job"
  synth_data
  cd "$work/job"
  submit_job "4 epochs" PATH="$(dirname "$bin"):$PATH" DATA="$work/data" "${tiny_train_env[@]}" \
    -- --nodes=1 --ntasks-per-node=2 cpu.sbatch --crop-size 56 --epochs 4 --loader-threads 1 \
    --val-threads 1
  run=$work/job/runs/chexnet-$job
  for _ in $(seq 1200); do
    compgen -G "$run/checkpoints/step-*.json" >/dev/null && break
    sleep 0.1
  done
  first=$(basename "$(compgen -G "$run/checkpoints/step-*.json" | head -n 1)" .json) ||
    fail "no checkpoint in $run/checkpoints within 120 s"
  scontrol requeue "$job"
  pass "requeued job $job after its checkpoint $first"
  wait_job "4 epochs, requeued"
  expect_in "$work/job-$job.txt" "Restarts=1 " "scontrol show job: Restarts=1"
  log=$work/job/chexscale-$job.out
  expect_in "$log" "CANCELLED AT" "the log keeps the first attempt (open-mode=append)"
  expect_eq "$(grep -c 'joining as rank 0 of 2' "$log")" 2 "the log holds both attempts"
  # Slurm's SIGTERM stops the first attempt with a checkpoint of its own (exit 75), unless the
  # attempt ends before it can.
  stopped=$(grep -o 'checkpoint written to [^,]*' "$log" | head -n 1 | sed 's/^checkpoint written to //')
  expect_in "$log" "resumed from ${stopped:-$run/checkpoints/$first.json}" \
    "the second attempt resumed in RUN"
  expect_eq "$(jq -s -c '[.[] | select(.type == "epoch") | .epoch] | unique' "$run/metrics.jsonl")" \
    "[0,1,2,3]" "epochs of both attempts in metrics.jsonl"
  last=$(compgen -G "$run/checkpoints/step-*.json" | sort | tail -n 1)
  expect_eq "$(jq -r .state.epoch "$last")" 4 "the last checkpoint is after epoch 4"
  ;;

preempt)
  cpu_variant "$work/job"
  "$bin" synth --out "$work/data" --images 128 --size 64 --threads 2 --seed 4 >"$work/synth.log" \
    2>&1 || fail "chexscale synth: $(cat "$work/synth.log")"
  cd "$work/job"
  preempt_args=(--crop-size 56 --batch-size 4 --epochs 2 --checkpoint-every 4
    --keep-checkpoints 3 --seed 5 --loader-threads 1 --val-threads 1)
  submit "uninterrupted" PATH="$(dirname "$bin"):$PATH" DATA="$work/data" RUN="$work/run-a" \
    "${tiny_train_env[@]}" -- --nodes=1 --ntasks-per-node=2 cpu.sbatch "${preempt_args[@]}"
  submit_job "signalled" PATH="$(dirname "$bin"):$PATH" DATA="$work/data" RUN="$work/run-b" \
    "${tiny_train_env[@]}" -- --nodes=1 --ntasks-per-node=2 cpu.sbatch "${preempt_args[@]}"
  for _ in $(seq 1200); do
    [ -f "$work/run-b/checkpoints/step-000000004.json" ] && break
    sleep 0.1
  done
  [ -f "$work/run-b/checkpoints/step-000000004.json" ] || fail "no step-4 checkpoint within 120 s"
  scancel --signal=USR1 --batch "$job"
  signalled=$SECONDS
  pass "SIGUSR1 to the batch shell of job $job after its step-4 checkpoint"
  wait_job "signalled, requeued"
  expect_in "$work/job-$job.txt" "Restarts=1 " "scontrol show job: Restarts=1 (requeued by the script)"
  log=$work/job/chexscale-$job.out
  expect_in "$log" "SIGUSR1: passing it to the workers" "the script passed SIGUSR1 on"
  expect_eq "$(grep -c 'stopping at step [0-9]* on SIGUSR1: checkpoint written to' "$log")" 1 \
    "rank 0 stopped once, on SIGUSR1"
  stopped=$(grep -o 'checkpoint written to [^,]*' "$log" | sed 's/^checkpoint written to //')
  expect_in "$log" "the workers stopped at a checkpoint (status 75): requeueing job $job" \
    "the script requeued on status 75"
  expect_eq "$(grep -c 'second stop signal' "$log")" 0 "no worker got the signal twice"
  expect_in "$log" "resumed from $stopped" "the second attempt resumed from the stop checkpoint"
  last=$(basename "$(compgen -G "$work/run-a/checkpoints/step-*.json" | sort | tail -n 1)" .json)
  for file in "$last.json" "$last.safetensors" best.safetensors; do
    cmp -s "$work/run-a/checkpoints/$file" "$work/run-b/checkpoints/$file" ||
      fail "$file differs between the uninterrupted and the signalled runs"
  done
  pass "final checkpoints ($last, best) byte-identical to the uninterrupted run's"
  pass "signal to completion of the requeued job: $((SECONDS - signalled)) s"
  ;;

killed)
  # Task 1 is killed one second after rank 0 reports its first step; steps are collective, so
  # both ranks are past the rendezvous then. The batch script's srun has --kill-on-bad-exit=1.
  for kill_on_bad_exit in 0 1; do
    out=$work/kill$kill_on_bad_exit
    start=$SECONDS
    rc=0
    srun -n 2 --kill-on-bad-exit=$kill_on_bad_exit --output="$out-task%t.log" \
      "$here/kill_task.sh" 1 "$out-task0.log" "bench 1/" \
      "$bin" bench "${tiny_bench[@]}" --steps 100000 --out "$work/bench" >"$out-srun.log" 2>&1 ||
      rc=$?
    took=$((SECONDS - start))
    [ "$rc" -ne 0 ] || fail "--kill-on-bad-exit=$kill_on_bad_exit: the step exited 0"
    pass "--kill-on-bad-exit=$kill_on_bad_exit: the step ended with status $rc after $took s"
    [ "$took" -lt 90 ] || fail "the step took $took s to end"
    expect_in "$out-srun.log" "task 1: Killed" "srun names the killed task"
    if [ "$kill_on_bad_exit" = 0 ]; then
      expect_in "$out-task0.log" "lost rank 1: heartbeat stopped" \
        "the surviving rank names the lost rank"
      expect_in "$out-srun.log" "task 0: Exited with exit code 1" "the surviving rank exits 1"
    else
      expect_in "$out-srun.log" "task 0: Terminated" "srun ends the surviving rank"
    fi
  done
  ;;

mpi)
  # srun's PMIx plugin gives OpenMPI its ranks: --backend mpi takes them from MPI itself.
  srun --mpi=list 2>&1 | grep -q pmix || fail "this Slurm has no PMIx plugin (srun --mpi=list)"
  srun -n 2 --mpi=pmix "$bin" bench "${tiny_bench[@]}" --steps 3 --backend mpi \
    --out "$work/bench" >"$work/bench.log" 2>&1 ||
    fail "srun -n 2 --mpi=pmix chexscale bench --backend mpi exited $? ($(tail -n 5 "$work/bench.log"))"
  pass "srun -n 2 --mpi=pmix chexscale bench --backend mpi exited 0"
  json=$work/bench/bench.json
  expect_eq "$(jq -r .backend "$json")" mpi "bench.json backend"
  expect_eq "$(jq -r .world_size "$json")" 2 "bench.json world size"
  ;;

*) fail "unknown case '$case_name'" ;;
esac
