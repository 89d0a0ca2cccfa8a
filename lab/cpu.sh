# shellcheck shell=bash
# CPU accounting of lab runs (sourced by compare.sh): a background sampler of the machine's CPU
# time counters during a run, and the CPU seconds each kind of work took in a time window.
#
# A sample is one line
#   "UNIX_TIME USER NICE SYSTEM IDLE IOWAIT IRQ SOFTIRQ STEAL NET_TX NET_RX RUN_USER RUN_SYSTEM":
# the aggregate "cpu" line of /proc/stat (ticks of 1/CLK_TCK s, summed over all CPUs), the NET_TX
# and NET_RX counts of /proc/softirqs (summed over CPUs), and the user and system ticks of the
# run's own processes (/proc/<pid>/stat of every process whose command line contains the run's
# MATCH string: the workers, their launchers and wrappers, all their threads; not the container
# engine's own processes, see CPU_ENGINE_COMMANDS). Both lab systems
# share this machine's CPUs, so the aggregate covers every worker, every namespace's network path
# and whatever else runs (other users' niced processes show up under NICE); the RUN_ columns are
# the run's processes alone, including the kernel work (syscalls, softirqs) done while one of
# them was on a CPU.

CPU_SAMPLE_INTERVAL="${CPU_SAMPLE_INTERVAL:-0.2}"  # seconds between samples
# Programs never counted as the run's, though their command lines name it: the container engine's
# client and monitor (in a cluster, the kubelet's and the runtime's work is outside the pod too).
CPU_ENGINE_COMMANDS="podman conmon docker"
cpu_sampler_pid=""
declare -A cpu_run_user=() cpu_run_system=()  # the run's processes: pid -> last ticks seen

# Adds the processes whose command line contains MATCH, other than CPU_ENGINE_COMMANDS, to
# cpu_run_user / cpu_run_system (about 2 ms for 100 processes; builtins only).
cpu_find_run_processes() {
  local d args cmd
  for d in /proc/[0-9]*; do
    [ -z "${cpu_run_user[${d#/proc/}]:-}" ] || continue
    mapfile -d '' args 2>/dev/null <"$d/cmdline" || continue
    cmd="${args[0]:-}"
    [[ " $CPU_ENGINE_COMMANDS " != *" ${cmd##*/} "* ]] || continue
    if [[ "${args[*]}" == *"$1"* ]]; then
      cpu_run_user[${d#/proc/}]=0
      cpu_run_system[${d#/proc/}]=0
    fi
  done
}

# Prints one sample line (see above), reading the run's processes' times first; uses only bash
# builtins (no fork), so sampling costs almost nothing. A process that has exited keeps the
# ticks it was last seen with.
cpu_sample() {
  local line name rest v tx=0 rx=0 pid stat ru=0 rs=0 now="${EPOCHREALTIME/,/.}"
  local -a f
  for pid in "${!cpu_run_user[@]}"; do
    if read -r stat 2>/dev/null <"/proc/$pid/stat"; then
      read -r -a f <<<"${stat##*) }"  # from field 3 (state) on: utime is f[11], stime f[12]
      cpu_run_user[$pid]=${f[11]}
      cpu_run_system[$pid]=${f[12]}
    fi
    ru=$((ru + cpu_run_user[$pid]))
    rs=$((rs + cpu_run_system[$pid]))
  done
  read -r line </proc/stat
  while read -r name rest; do
    case "$name" in
      NET_TX:) for v in $rest; do tx=$((tx + v)); done ;;
      NET_RX:) for v in $rest; do rx=$((rx + v)); done ;;
    esac
  done </proc/softirqs
  # shellcheck disable=SC2086
  set -- $line
  echo "$now $2 $3 $4 $5 $6 $7 $8 $9 $tx $rx $ru $rs"
}

# Starts sampling into FILE every CPU_SAMPLE_INTERVAL seconds until cpu_sampler_stop (or until
# this shell exits); the run's processes are those whose command line contains MATCH, looked for
# at every sample. One sampler at a time.
cpu_sampler_start() {
  local file="$1" match="$2" fifo
  [ -z "$cpu_sampler_pid" ] || lab_die "a CPU sampler is already running (pid $cpu_sampler_pid)"
  fifo=$(mktemp -u /tmp/chexscale-cpu.XXXXXX)
  mkfifo "$fifo"
  : >"$file"
  (
    # A FIFO opened read-write never delivers data: `read -t` on it is a sleep without a fork.
    exec {pause_fd}<>"$fifo"
    rm -f "$fifo"
    while kill -0 $$ 2>/dev/null; do
      cpu_find_run_processes "$match"
      cpu_sample >>"$file"
      read -r -t "$CPU_SAMPLE_INTERVAL" -u "$pause_fd" _ || true
    done
  ) &
  cpu_sampler_pid=$!
  cpu_sampler_file="$file"
}

# Stops the sampler started by cpu_sampler_start and appends a copy of its last sample with the
# time of stopping (the run's processes have exited; the counters left have not moved with them).
cpu_sampler_stop() {
  local last
  [ -n "$cpu_sampler_pid" ] || return 0
  kill "$cpu_sampler_pid" 2>/dev/null || true
  wait "$cpu_sampler_pid" 2>/dev/null || true
  cpu_sampler_pid=""
  last=$(tail -n 1 "$cpu_sampler_file")
  [ -n "$last" ] || return 0
  cpu_sample | awk -v last="$last" '{ split(last, l, " "); $12 = l[12]; $13 = l[13]; print }' \
    >>"$cpu_sampler_file"
}

# Writes the CPU accounting of one run as JSON (schema chexscale.lab-cpu/1) to stdout:
#   windows.run    from the first to the last sample: the whole run (process start-up, model
#                  construction, rendezvous, warm-up steps, the timed steps, exit);
#   windows.timed  the timed steps only: the ELAPSED_S seconds that end when the run's bench.json
#                  was written (its mtime END_UNIX_S); counters interpolated linearly between the
#                  samples around each end.
# Each window: its start (unix s) and length, CPU seconds per /proc/stat field (over all CPUs),
# NET_TX / NET_RX softirq counts, and the run's processes' user and system CPU seconds. Fails when
# the timed window is not inside the samples.
cpu_account() {
  local samples="$1" tag="$2" end_unix_s="$3" elapsed_s="$4" ticks cpus
  ticks=$(getconf CLK_TCK)
  cpus=$(getconf _NPROCESSORS_ONLN)
  awk -v t2="$end_unix_s" -v len="$elapsed_s" -v hz="$ticks" -v cpus="$cpus" -v tag="$tag" \
    -v interval="$CPU_SAMPLE_INTERVAL" '
    { n++; t[n] = $1; for (i = 2; i <= 13; i++) c[n, i] = $i }
    # Column i at time x, interpolated linearly between the samples around it.
    function at(x, i,   k, f) {
      for (k = 2; k < n && t[k] < x; k++) {}
      f = t[k] > t[k - 1] ? (x - t[k - 1]) / (t[k] - t[k - 1]) : 1
      return c[k - 1, i] + f * (c[k, i] - c[k - 1, i])
    }
    function window(name, a, b,   i, s) {
      s = sprintf("\"%s\": {\"start_unix_s\": %.3f, \"seconds\": %.3f", name, a, b - a)
      split("user nice system idle iowait irq softirq steal", field, " ")
      for (i = 2; i <= 9; i++)
        s = s sprintf(", \"%s_s\": %.4f", field[i - 1], (at(b, i) - at(a, i)) / hz)
      s = s sprintf(", \"net_tx\": %.0f, \"net_rx\": %.0f", at(b, 10) - at(a, 10), at(b, 11) - at(a, 11))
      s = s sprintf(", \"run_user_s\": %.4f, \"run_system_s\": %.4f}", (at(b, 12) - at(a, 12)) / hz, \
        (at(b, 13) - at(a, 13)) / hz)
      return s
    }
    END {
      if (n < 2) { print "cpu_account: fewer than 2 samples" > "/dev/stderr"; exit 1 }
      t1 = t2 - len
      if (t1 < t[1] || t2 > t[n]) {
        printf "cpu_account: timed window %.3f..%.3f is outside the samples %.3f..%.3f\n", \
          t1, t2, t[1], t[n] > "/dev/stderr"
        exit 1
      }
      printf "{\"schema\": \"chexscale.lab-cpu/1\", \"run\": \"%s\", \"cpus\": %d, ", tag, cpus
      printf "\"samples\": %d, \"sample_interval_s\": %s, \"windows\": {%s, %s}}\n", n, interval, \
        window("run", t[1], t[n]), window("timed", t1, t2)
    }' "$samples"
}
