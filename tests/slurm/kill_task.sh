#!/bin/bash
# Task wrapper for the killed-task test: kill_task.sh RANK FILE PATTERN COMMAND... runs COMMAND in
# every srun task; in the task whose SLURM_PROCID is RANK, COMMAND gets SIGKILL one second after
# FILE first contains PATTERN (the job is past its rendezvous and training), or after 120 s.
set -euo pipefail
rank=$1 file=$2 pattern=$3
shift 3
if [ "$SLURM_PROCID" = "$rank" ]; then
  target=$$
  (
    for _ in $(seq 1200); do
      grep -q -- "$pattern" "$file" 2>/dev/null && break
      sleep 0.1
    done
    sleep 1
    kill -KILL "$target"
  ) </dev/null >/dev/null 2>&1 &
fi
exec "$@"
