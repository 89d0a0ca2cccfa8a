# shellcheck shell=bash
# Fixed-speed emulated devices (sourced by compare.sh and bench/simulate/lab_check.sh): every lab
# worker runs in a CPU cgroup of its own with a quota of CPU_QUOTA_CORES of one core, so its
# compute runs at the same speed whatever else runs on the machine (other workers, other tests).
#
#   quota   the ceiling, per 10 ms period: cgroup v1 cpu.cfs_quota_us / cpu.cfs_period_us under /sys/fs/cgroup/cpu,
#           or cgroup v2 cpu.max where the unified hierarchy has the cpu controller;
#   weight  the floor: the largest cpu.shares (v1) / cpu.weight (v2), so that a worker gets its
#           quota before any process outside the lab's groups (a busy loop, a compiler) gets more
#           than its fair share of what is left.
# The quota covers the worker's own threads (compute and its Gloo threads); the network path (the
# kernel's veth, VXLAN and tc work in softirqs and kernel threads) stays outside. Groups are named
# <LAB_PREFIX>-cpu-<name>; cpu_quota_cleanup removes them (compare.sh and lab_check.sh call it on
# exit, also on failure).
#
#   cpu_quota_init CORES        check CORES (0.01 .. the CPU count) and find the cgroup layout
#   cpu_quota_create NAME       make (or reuse) group NAME with the quota
#   cpu_quota_run NAME CMD...   run CMD (a program or a shell function) inside group NAME
#   cpu_quota_maybe_run NAME CMD...  the same once cpu_quota_init was called, else CMD alone
#   cpu_quota_usage_s NAME      CPU seconds the group's processes have used (cpuacct / cpu.stat)
#   cpu_quota_throttled NAME    periods in which the group was held at its quota so far
#   cpu_quota_cleanup           move what is left in the groups to the root group, remove them
#   cpu_quota_remove_all        the same for every group of LAB_PREFIX (cluster.sh down)

CPU_QUOTA_CORES=""
# A short period: a worker that idles through a transfer gets no more than one period's quota of
# catching up (about 5 ms) when it computes again, so a phase of compute takes the same time
# after an idle stretch as in a profile that never idles (at 100 ms, the kernel's default, a
# DenseNet-121 forward after an allreduce ran at full speed, twice as fast as profiled).
CPU_QUOTA_PERIOD_US="${CPU_QUOTA_PERIOD_US:-10000}"
cpu_quota_layout=""  # v1 or v2
cpu_quota_cpu_root="" cpu_quota_acct_root=""
cpu_quota_groups=()

cpu_quota_init() {
  local cores="$1" cpus
  cpus=$(getconf _NPROCESSORS_ONLN)
  awk -v c="$cores" -v n="$cpus" 'BEGIN { exit !(c ~ /^[0-9]*\.?[0-9]+$/ && c >= 0.01 && c <= n) }' ||
    lab_die "--worker-cpu '$cores': a share of one core from 0.01 to this machine's $cpus CPUs (0.4 = 40 % of a core)"
  [ "$(id -u)" -eq 0 ] || lab_die "--worker-cpu needs root (it makes CPU cgroups)"
  if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
    cpu_quota_layout=v2 cpu_quota_cpu_root=/sys/fs/cgroup cpu_quota_acct_root=/sys/fs/cgroup
    grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control ||
      lab_die "--worker-cpu: cannot enable the cpu controller in /sys/fs/cgroup/cgroup.subtree_control"
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    cpu_quota_layout=v1 cpu_quota_cpu_root=/sys/fs/cgroup/cpu
    if [ -f /sys/fs/cgroup/cpu/cpuacct.usage ]; then
      cpu_quota_acct_root=/sys/fs/cgroup/cpu  # cpu,cpuacct mounted together
    elif [ -f /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then
      cpu_quota_acct_root=/sys/fs/cgroup/cpuacct
    else
      lab_die "--worker-cpu: no cpuacct controller under /sys/fs/cgroup (needed to account the quota)"
    fi
  else
    lab_die "--worker-cpu: no CPU cgroup controller here (neither cgroup v2 with cpu in /sys/fs/cgroup/cgroup.controllers nor v1 /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
  fi
  CPU_QUOTA_CORES="$cores"
}

cpu_quota_dir() { echo "$1/${LAB_PREFIX}-cpu-$2"; }

# The directories of group NAME: the cpu group, and the cpuacct group where that is another one.
cpu_quota_dirs() {
  cpu_quota_dir "$cpu_quota_cpu_root" "$1"
  [ "$cpu_quota_acct_root" = "$cpu_quota_cpu_root" ] || cpu_quota_dir "$cpu_quota_acct_root" "$1"
}

cpu_quota_create() {
  local name="$1" quota d
  [ -n "$CPU_QUOTA_CORES" ] || lab_die "cpu_quota_create before cpu_quota_init"
  quota=$(awk -v c="$CPU_QUOTA_CORES" -v p="$CPU_QUOTA_PERIOD_US" 'BEGIN { printf "%d", c * p }')
  for d in $(cpu_quota_dirs "$name"); do mkdir -p "$d" || lab_die "cannot make cgroup $d"; done
  d=$(cpu_quota_dir "$cpu_quota_cpu_root" "$name")
  if [ "$cpu_quota_layout" = v2 ]; then
    echo "$quota $CPU_QUOTA_PERIOD_US" >"$d/cpu.max" && echo 10000 >"$d/cpu.weight"
  else
    echo "$CPU_QUOTA_PERIOD_US" >"$d/cpu.cfs_period_us" && echo "$quota" >"$d/cpu.cfs_quota_us" &&
      echo 262144 >"$d/cpu.shares"
  fi || lab_die "cannot set the CPU quota of cgroup $d"
  [[ " ${cpu_quota_groups[*]} " == *" $name "* ]] || cpu_quota_groups+=("$name")
}

# Runs CMD in a subshell that has first moved itself into group NAME: CMD and everything it
# starts stay there (a shell function as well as a program). Returns CMD's status.
cpu_quota_run() {
  local name="$1" d
  shift
  (
    for d in $(cpu_quota_dirs "$name"); do
      echo "$BASHPID" >"$d/cgroup.procs" || lab_die "cannot move process $BASHPID into $d"
    done
    "$@"
  )
}

# Periods in which group NAME hit its quota (cpu.stat nr_throttled, v1 and v2).
cpu_quota_throttled() {
  awk '$1 == "nr_throttled" { print $2 }' "$(cpu_quota_dir "$cpu_quota_cpu_root" "$1")/cpu.stat"
}

cpu_quota_usage_s() {
  local d
  d=$(cpu_quota_dir "$cpu_quota_acct_root" "$1")
  if [ "$cpu_quota_layout" = v2 ]; then
    awk '$1 == "usage_usec" { printf "%.6f\n", $2 / 1e6 }' "$d/cpu.stat"
  else
    awk '{ printf "%.6f\n", $1 / 1e9 }' "$d/cpuacct.usage"
  fi
}

# Moves what is left in cgroup DIR to the group above and removes DIR, trying for up to 2 s: a
# process killed just before may still be leaving it.
cpu_quota_remove_dir() {
  local d="$1" pid try
  for ((try = 0; try < 20; try++)); do
    [ -d "$d" ] || return 0
    while read -r pid; do echo "$pid" >"$(dirname "$d")/cgroup.procs" 2>/dev/null || true; done <"$d/cgroup.procs"
    rmdir "$d" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "lab: warning: could not remove cgroup $d" >&2
}

cpu_quota_cleanup() {
  local name d
  for name in "${cpu_quota_groups[@]}"; do
    for d in $(cpu_quota_dirs "$name"); do cpu_quota_remove_dir "$d"; done
  done
  cpu_quota_groups=()
}

# Removes every group of this LAB_PREFIX, also those a killed script left (cluster.sh down).
cpu_quota_remove_all() {
  local d
  for d in /sys/fs/cgroup/"${LAB_PREFIX}"-cpu-* /sys/fs/cgroup/cpu/"${LAB_PREFIX}"-cpu-* \
    /sys/fs/cgroup/cpuacct/"${LAB_PREFIX}"-cpu-*; do
    [ -d "$d" ] && cpu_quota_remove_dir "$d"
  done
  return 0
}

# cpu_quota_run NAME CMD... when cpu_quota_init was called, else CMD... as it is.
cpu_quota_maybe_run() {
  local name="$1"
  shift
  if [ -n "$CPU_QUOTA_CORES" ]; then cpu_quota_run "$name" "$@"; else "$@"; fi
}
