# Shared names and helpers of the emulated cluster lab (sourced by cluster.sh and compare.sh).
#
# Everything the lab makes lives in network namespaces whose names start with $LAB_PREFIX:
#   <prefix>-fab   the fabric: a bridge "br0" with one port "n<i>" per node
#   <prefix>-n<i>  node i: "eth0" on the fabric (10.77.0.<i+1>/24), "flannel.1" (VXLAN, VNI 1,
#                  UDP 4789, MTU 1450, 10.78.<i>.0/32), "cni0" bridge (10.78.<i>.1/24)
#   <prefix>-p<i>  the pod on node i: "eth0" (10.78.<i>.2/24, MTU 1450) behind cni0
# and /etc/netns/<ns>/hosts files (name resolution inside those namespaces). No address is added
# to the root namespace: lab traffic only flows between the lab's own namespaces.

LAB_PREFIX="${LAB_PREFIX:-chxlab}"
LAB_FABRIC_NET="${LAB_FABRIC_NET:-10.77.0}"  # fabric addresses: <net>.<i+1>/24
LAB_POD_NET="${LAB_POD_NET:-10.78}"          # pod subnets: <net>.<i>.0/24
LAB_VNI=1
LAB_VXLAN_PORT=4789
LAB_OVERLAY_MTU=1450
LAB_STATE_DIR="${LAB_STATE_DIR:-/run/chexscale-lab}"

lab_fabric_ns() { echo "${LAB_PREFIX}-fab"; }
lab_node_ns() { echo "${LAB_PREFIX}-n$1"; }
lab_pod_ns() { echo "${LAB_PREFIX}-p$1"; }
lab_fabric_addr() { echo "${LAB_FABRIC_NET}.$(($1 + 1))"; }
lab_vtep_addr() { echo "${LAB_POD_NET}.$1.0"; }
lab_gateway_addr() { echo "${LAB_POD_NET}.$1.1"; }
lab_pod_addr() { echo "${LAB_POD_NET}.$1.2"; }
lab_pod_subnet() { echo "${LAB_POD_NET}.$1.0/24"; }
# Deterministic MAC of node i's flannel.1, as flannel publishes it in the node's annotations.
lab_vtep_mac() { printf '02:78:00:00:%02x:%02x' $(($1 / 256)) $(($1 % 256)); }
lab_state_file() { echo "${LAB_STATE_DIR}/${LAB_PREFIX}.env"; }

lab_die() {
  echo "lab: error: $*" >&2
  exit 1
}

lab_require_root() {
  [ "$(id -u)" -eq 0 ] || lab_die "the lab needs root (network namespaces, veth, VXLAN, tc); run it as root"
  command -v ip >/dev/null || lab_die "'ip' not found: install iproute2"
  command -v tc >/dev/null || lab_die "'tc' not found: install iproute2"
}

# Checks that this machine lets us create a network namespace; prints the reason when it does not.
lab_probe_netns() {
  local probe="${LAB_PREFIX}-probe$$" out
  if ! out=$(ip netns add "$probe" 2>&1); then
    echo "cannot create network namespaces here: ${out}"
    return 1
  fi
  ip netns del "$probe" 2>/dev/null
  return 0
}

lab_ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# The node count recorded by the last `cluster.sh up` (0 when the lab is down).
lab_nodes_up() {
  local f
  f=$(lab_state_file)
  if [ -f "$f" ]; then (. "$f" && echo "${LAB_NODES:-0}"); else echo 0; fi
}

# Rate like 500mbit / 1gbit / 800kbit -> bits per second (for tbf's burst sizing).
lab_rate_bps() {
  local r="$1"
  [[ "$r" =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || lab_die "rate '$r' is not <number>kbit|mbit|gbit (e.g. 500mbit)"
  local n="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[2]}"
  case "$unit" in
    kbit) echo $((n * 1000)) ;;
    mbit) echo $((n * 1000000)) ;;
    gbit) echo $((n * 1000000000)) ;;
  esac
}

# `ip netns exec NS CMD...` that keeps this host's /sys: the same network namespace and the same
# /etc/hosts binding (/etc/netns/NS/hosts over /etc/hosts, in a mount namespace of its own), but
# without ip's remount of /sys, which hides /sys/fs/cgroup (`launch --worker-cgroup` needs it).
# /sys/class/net then shows the host's devices: read a namespace's counters with ip netns exec.
lab_netns_exec() {
  local ns="$1"
  shift
  [ -e "/run/netns/$ns" ] || lab_die "no network namespace $ns"
  # shellcheck disable=SC2016
  unshare --mount --propagation private -- /bin/sh -c '
    ns=$1; shift
    [ ! -f "/etc/netns/$ns/hosts" ] || mount --bind "/etc/netns/$ns/hosts" /etc/hosts || exit 126
    exec nsenter --net="/run/netns/$ns" -- "$@"' lab_netns_exec "$ns" "$@"
}

# Runs CMD in the clean environment the lab's workers start in (PATH and HOME only), so that a
# profile taken on the host and the runs it predicts differ in nothing the caller's shell
# exports: an inherited OPENBLAS_CORETYPE=Haswell, for one, made DenseNet-121 steps 15-20 %
# slower on this project's AMD machine.
lab_clean_env() { env -i PATH="$PATH" HOME=/tmp "$@"; }

# The lab's own names, one "ADDRESS NAME" a line: node-<i> (fabric) and pod-<i> (pod network).
lab_base_hosts() {
  local i
  for ((i = 0; i < $1; i++)); do
    echo "$(lab_fabric_addr "$i") node-$i"
    echo "$(lab_pod_addr "$i") pod-$i"
  done
}

# Writes /etc/netns/NS/hosts (ip netns exec binds it over /etc/hosts): localhost, then the lines given.
lab_write_hosts() {
  local ns="$1"
  shift
  mkdir -p "/etc/netns/${ns}"
  {
    echo "127.0.0.1 localhost"
    printf '%s\n' "$@"
  } >"/etc/netns/${ns}/hosts.tmp"
  mv "/etc/netns/${ns}/hosts.tmp" "/etc/netns/${ns}/hosts"
}

# Succeeds when a TCP connection attempt from NS to ADDR reaches a host (a refusal counts:
# the peer's kernel answered); fails on timeout or no route.
lab_reachable() {
  local ns="$1" addr="$2" out
  out=$(ip netns exec "$ns" timeout 3 bash -c "exec 3<>/dev/tcp/${addr}/9" 2>&1)
  [ $? -eq 0 ] || [[ "$out" == *"Connection refused"* ]]
}
