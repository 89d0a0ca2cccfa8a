#!/usr/bin/env bash
# The emulated cluster: N nodes as network namespaces on a bridge (the fabric), a VXLAN overlay
# across them on flannel's model (the pod network), and bandwidth caps with tbf.
#
#   lab/cluster.sh up --nodes N [--fabric-rate R] [--overlay-rate R]   (idempotent)
#   lab/cluster.sh status
#   lab/cluster.sh measure [--mib M]   TCP throughput node 0 -> 1 (fabric) and pod 0 -> 1 (overlay)
#   lab/cluster.sh down         (also removes the lab's CPU cgroups: lab/cpu_quota.sh)
#
# R is <n>kbit|mbit|gbit, or none. --fabric-rate caps each node's link to the fabric (both
# directions), modelling the wire; --overlay-rate caps what a node sends through its VXLAN device,
# modelling a slower IP path (IPoIB, a software overlay). Without a flag, or with none, that link
# is uncapped (and an earlier cap is removed). Set LAB_PREFIX to run several labs side by side
# (names are <prefix>-...).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab/lib.sh
. "$here/lib.sh"
# shellcheck source=lab/cpu_quota.sh
. "$here/cpu_quota.sh"

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# tbf on DEV in NS at RATE, or no qdisc when RATE is empty.
set_rate() {
  local ns="$1" dev="$2" rate="$3"
  if [ -z "$rate" ]; then
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    return
  fi
  local bps burst
  bps=$(lab_rate_bps "$rate")
  burst=$((bps / 8 / 250)) # 4 ms at line rate, and at least a 64 KiB GSO segment
  [ "$burst" -ge 65536 ] || burst=65536
  ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms
}

make_ns() { lab_ns_exists "$1" || ip netns add "$1"; ip -n "$1" link set lo up; }

has_link() { ip -n "$1" link show "$2" >/dev/null 2>&1; }

up_fabric() {
  local fab
  fab=$(lab_fabric_ns)
  make_ns "$fab"
  has_link "$fab" br0 || ip -n "$fab" link add br0 type bridge
  ip -n "$fab" link set br0 up
}

# Node i: its fabric link, flannel.1 VTEP, cni0 bridge and the pod namespace behind it.
up_node() {
  local i="$1" fab node pod
  fab=$(lab_fabric_ns)
  node=$(lab_node_ns "$i")
  pod=$(lab_pod_ns "$i")
  make_ns "$node"
  make_ns "$pod"
  ip netns exec "$node" sysctl -qw net.ipv4.ip_forward=1
  has_link "$node" eth0 || ip -n "$node" link add eth0 type veth peer name "n$i" netns "$fab"
  ip -n "$fab" link set "n$i" master br0 up
  ip -n "$node" addr replace "$(lab_fabric_addr "$i")/24" dev eth0
  ip -n "$node" link set eth0 up

  has_link "$node" flannel.1 || ip -n "$node" link add flannel.1 type vxlan id "$LAB_VNI" \
    local "$(lab_fabric_addr "$i")" dev eth0 dstport "$LAB_VXLAN_PORT" nolearning
  ip -n "$node" link set flannel.1 address "$(lab_vtep_mac "$i")" mtu "$LAB_OVERLAY_MTU" up
  ip -n "$node" addr replace "$(lab_vtep_addr "$i")/32" dev flannel.1

  has_link "$node" cni0 || ip -n "$node" link add cni0 type bridge
  ip -n "$node" link set cni0 mtu "$LAB_OVERLAY_MTU" up
  ip -n "$node" addr replace "$(lab_gateway_addr "$i")/24" dev cni0
  has_link "$node" veth0 || ip -n "$node" link add veth0 type veth peer name eth0 netns "$pod"
  ip -n "$node" link set veth0 master cni0 mtu "$LAB_OVERLAY_MTU" up
  ip -n "$pod" link set eth0 mtu "$LAB_OVERLAY_MTU" up
  ip -n "$pod" addr replace "$(lab_pod_addr "$i")/24" dev eth0
  ip -n "$pod" route replace default via "$(lab_gateway_addr "$i")"
}

# flannel's vxlan backend programs, for every other node j: a route to j's pod subnet via j's VTEP
# address (onlink), a permanent neighbour entry with j's VTEP MAC, and an FDB entry that sends
# that MAC to j's fabric address.
up_routes() {
  local i="$1" n="$2" node j
  node=$(lab_node_ns "$i")
  for ((j = 0; j < n; j++)); do
    [ "$j" -eq "$i" ] && continue
    ip -n "$node" route replace "$(lab_pod_subnet "$j")" via "$(lab_vtep_addr "$j")" dev flannel.1 onlink
    ip -n "$node" neigh replace "$(lab_vtep_addr "$j")" lladdr "$(lab_vtep_mac "$j")" dev flannel.1 nud permanent
    bridge -n "$node" fdb replace "$(lab_vtep_mac "$j")" dev flannel.1 dst "$(lab_fabric_addr "$j")" self permanent
  done
}

# Name resolution inside the lab: node-<i> = fabric address, pod-<i> = pod address.
write_hosts() {
  local n="$1" i lines=()
  mapfile -t lines < <(lab_base_hosts "$n")
  lab_write_hosts "$(lab_fabric_ns)" "${lines[@]}"
  for ((i = 0; i < n; i++)); do
    lab_write_hosts "$(lab_node_ns "$i")" "${lines[@]}"
    lab_write_hosts "$(lab_pod_ns "$i")" "${lines[@]}"
  done
}

remove_node() {
  local i="$1" ns
  for ns in "$(lab_pod_ns "$i")" "$(lab_node_ns "$i")"; do
    ip netns del "$ns" 2>/dev/null || true
    ! lab_ns_exists "$ns" || lab_die "could not delete the namespace $ns"
    rm -rf "/etc/netns/${ns}"
  done
  ip -n "$(lab_fabric_ns)" link del "n$i" 2>/dev/null || true
}

cmd_up() {
  local nodes="" fabric_rate="" overlay_rate=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) nodes="${2:-}"; shift 2 ;;
      --fabric-rate) fabric_rate="${2:-}"; shift 2 ;;
      --overlay-rate) overlay_rate="${2:-}"; shift 2 ;;
      -h | --help) usage ;;
      *) lab_die "unknown option '$1' (see lab/cluster.sh --help)" ;;
    esac
  done
  [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 200 ] ||
    lab_die "--nodes must be 1..200 (got '${nodes}')"
  [ "$fabric_rate" != none ] || fabric_rate=""
  [ "$overlay_rate" != none ] || overlay_rate=""
  [ -z "$fabric_rate" ] || lab_rate_bps "$fabric_rate" >/dev/null
  [ -z "$overlay_rate" ] || lab_rate_bps "$overlay_rate" >/dev/null
  lab_require_root
  local reason
  reason=$(lab_probe_netns) || lab_die "$reason"

  local before i
  before=$(lab_nodes_up)
  for ((i = nodes; i < before; i++)); do remove_node "$i"; done
  up_fabric
  for ((i = 0; i < nodes; i++)); do up_node "$i"; done
  for ((i = 0; i < nodes; i++)); do
    up_routes "$i" "$nodes"
    set_rate "$(lab_node_ns "$i")" eth0 "$fabric_rate"
    set_rate "$(lab_fabric_ns)" "n$i" "$fabric_rate"
    set_rate "$(lab_node_ns "$i")" flannel.1 "$overlay_rate"
  done
  write_hosts "$nodes"
  mkdir -p "$LAB_STATE_DIR"
  printf 'LAB_NODES=%s\nLAB_FABRIC_RATE=%s\nLAB_OVERLAY_RATE=%s\n' "$nodes" "$fabric_rate" \
    "$overlay_rate" >"$(lab_state_file)"
  echo "lab ${LAB_PREFIX}: ${nodes} node(s) up; fabric ${LAB_FABRIC_NET}.0/24 (${fabric_rate:-uncapped}), overlay ${LAB_POD_NET}.0.0/16 VXLAN VNI ${LAB_VNI} (${overlay_rate:-uncapped})"
}

# This lab's namespaces (its probes' too) that `ip netns list` shows now.
lab_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${LAB_PREFIX}-(fab|n[0-9]+|p[0-9]+|probe[0-9]+)$" || true
}

cmd_down() {
  lab_require_root
  local ns attempt left
  # Listed again until none is left: with other labs adding and deleting namespaces at the same
  # moment, a listing has been seen to miss one of ours.
  for attempt in 1 2 3 4 5; do
    left=$(lab_namespaces)
    [ -n "$left" ] || break
    for ns in $left; do ip netns del "$ns" 2>/dev/null || true; done
    sleep 0.1
  done
  left=$(lab_namespaces)
  [ -z "$left" ] || lab_die "could not delete the namespaces $(echo $left)"
  rm -rf /etc/netns/"${LAB_PREFIX}"-*
  rmdir /etc/netns 2>/dev/null || true
  rm -f "$(lab_state_file)"
  cpu_quota_remove_all  # fixed-speed workers' cgroups a killed compare.sh left
  echo "lab ${LAB_PREFIX}: down"
}

# The tbf rate on DEV in NS, or "uncapped".
rate_of() {
  local rate
  rate=$(ip netns exec "$1" tc qdisc show dev "$2" | sed -n 's/.* rate \([^ ]*\).*/\1/p' | head -1)
  echo "${rate:-uncapped}"
}

cmd_status() {
  lab_require_root
  local n i node pod ok=0
  n=$(lab_nodes_up)
  if [ "$n" -eq 0 ]; then
    echo "lab ${LAB_PREFIX}: down"
    return 3
  fi
  # shellcheck disable=SC1090
  . "$(lab_state_file)"
  echo "lab ${LAB_PREFIX}: ${n} node(s); fabric rate ${LAB_FABRIC_RATE:-uncapped}, overlay rate ${LAB_OVERLAY_RATE:-uncapped}"
  printf '%-6s %-16s %-6s %-16s %-18s %s\n' node fabric mtu pod "pod subnet" "caps (eth0 / flannel.1)"
  for ((i = 0; i < n; i++)); do
    node=$(lab_node_ns "$i")
    pod=$(lab_pod_ns "$i")
    if ! lab_ns_exists "$node" || ! lab_ns_exists "$pod"; then
      echo "node $i: MISSING namespace $node or $pod (run: lab/cluster.sh up --nodes $n)"
      ok=1
      continue
    fi
    printf '%-6s %-16s %-6s %-16s %-18s %s / %s\n' "$i" "$(lab_fabric_addr "$i")" \
      "$(ip -n "$pod" -o link show eth0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')" "$(lab_pod_addr "$i")" \
      "$(lab_pod_subnet "$i")" \
      "$(rate_of "$node" eth0)" "$(rate_of "$node" flannel.1)"
  done
  # Reachability: node 0 to every node over the fabric, pod 0 to every pod over the overlay.
  for ((i = 1; i < n; i++)); do
    if lab_reachable "$(lab_node_ns 0)" "$(lab_fabric_addr "$i")"; then
      echo "fabric  node 0 -> node $i ($(lab_fabric_addr "$i")): ok"
    else
      echo "fabric  node 0 -> node $i ($(lab_fabric_addr "$i")): UNREACHABLE"
      ok=1
    fi
    if lab_reachable "$(lab_pod_ns 0)" "$(lab_pod_addr "$i")"; then
      echo "overlay pod 0 -> pod $i ($(lab_pod_addr "$i")): ok"
    else
      echo "overlay pod 0 -> pod $i ($(lab_pod_addr "$i")): UNREACHABLE"
      ok=1
    fi
  done
  return "$ok"
}

# Mbit/s of one TCP transfer of MIB MiB from namespace FROM to TO_ADDR served in namespace TO.
probe() {
  local from="$1" to="$2" to_addr="$3" mib="$4" port=5399 server rate
  ip netns exec "$to" python3 "$here/tcp_probe.py" serve "$to_addr" "$port" &
  server=$!
  rate=$(ip netns exec "$from" python3 "$here/tcp_probe.py" send "$to_addr" "$port" "$mib") || rate=""
  wait "$server" || true
  [ -n "$rate" ] || lab_die "no TCP transfer from $from to $to_addr"
  echo "$rate"
}

cmd_measure() {
  local mib=20 n
  [ "${1:-}" != "--mib" ] || mib="${2:-}"
  [[ "$mib" =~ ^[0-9]+$ ]] && [ "$mib" -ge 1 ] || lab_die "--mib must be a positive number"
  lab_require_root
  command -v python3 >/dev/null || lab_die "'python3' not found: measure uses lab/tcp_probe.py"
  n=$(lab_nodes_up)
  [ "$n" -ge 2 ] || lab_die "measure needs a lab with 2 or more nodes up"
  echo "fabric  node 0 -> node 1: $(probe "$(lab_node_ns 0)" "$(lab_node_ns 1)" "$(lab_fabric_addr 1)" "$mib") Mbit/s"
  echo "overlay pod 0 -> pod 1: $(probe "$(lab_pod_ns 0)" "$(lab_pod_ns 1)" "$(lab_pod_addr 1)" "$mib") Mbit/s"
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  measure) cmd_measure "$@" ;;
  -h | --help | help) usage ;;
  *) lab_die "unknown command '$command' (up, down, status, measure)" ;;
esac
