# Shared by bench/comm's two-node MPI scripts (sourced): brings up 2 lab nodes (network namespaces
# on the fabric bridge, lab/cluster.sh) and runs mpirun in node 0's namespace, reaching node 1
# through a launch agent that enters node 1's namespace instead of ssh (the lab's nodes share this
# host). MPI moves the bytes over TCP on the fabric (--mca btl tcp,self: the nodes share a
# hostname, and OpenMPI's shared memory transport cannot tell them apart). Needs root.
#   lab_mpi_up RATE            cluster up with the fabric capped at RATE (a tbf rate, or none);
#                              sets lab_mpi_work (a temporary folder) and a trap that takes both down
#   lab_mpirun PER_NODE ARG... mpirun -np 2xPER_NODE in node 0's namespace with ARG... after the
#                              lab's options (then $MPIRUN_ARGS); OMP_NUM_THREADS=1 on every rank
# shellcheck shell=bash

lab_mpi_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LAB_PREFIX=${LAB_PREFIX:-chxmpi}
# shellcheck source=lab/lib.sh
. "$lab_mpi_here/../../lab/lib.sh"

lab_mpi_up() {
  local cluster="$lab_mpi_here/../../lab/cluster.sh"
  lab_require_root
  "$cluster" up --nodes 2 --fabric-rate "$1" >/dev/null
  lab_mpi_work=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "'$cluster' down >/dev/null 2>&1 || true; rm -rf '$lab_mpi_work'" EXIT
  # mpirun's launch agent: "AGENT HOST COMMAND..." runs COMMAND in the namespace of the node
  # whose fabric address is HOST.
  cat >"$lab_mpi_work/agent" <<AGENT
#!/bin/sh
host=\$1
shift
for i in 0 1; do
  if [ "\$host" = "\$(echo $LAB_FABRIC_NET).\$((i + 1))" ]; then
    exec ip netns exec "${LAB_PREFIX}-n\$i" sh -c "\$*"
  fi
done
echo "agent: \$host is no lab node" >&2
exit 1
AGENT
  chmod +x "$lab_mpi_work/agent"
}

lab_mpirun() {
  local per_node=$1
  shift
  # shellcheck disable=SC2086
  ip netns exec "$(lab_node_ns 0)" env OMP_NUM_THREADS=1 mpirun -np $((2 * per_node)) \
    -H "$(lab_fabric_addr 0):$per_node,$(lab_fabric_addr 1):$per_node" --allow-run-as-root \
    --mca plm_rsh_agent "$lab_mpi_work/agent" \
    --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    ${MPIRUN_ARGS:-} -x OMP_NUM_THREADS "$@"
}
