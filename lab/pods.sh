# Runs the pods of a rendered Indexed Job the way the kubelet would (sourced by compare.sh):
# the container's command + args with $(VAR) references expanded, its env (fieldRefs resolved for
# pod i), JOB_COMPLETION_INDEX and HOSTNAME set, and the headless Service's DNS names resolving to
# the pods' addresses, either as bare processes in the pod's network namespace (pods_run; names
# through /etc/netns/<ns>/hosts) or as containers of the image joined to that namespace
# (pods_run_container; the engine flags of lab/pod_containers.sh, which the caller sources).
# Needs yq (Debian package yq) and jq.

# NAME=VALUE entries pods_run adds to the pod's environment (the lab's own, outside the manifest:
# compare.sh's CHEXSCALE_WORKER_CGROUP for fixed-speed workers).
POD_EXTRA_ENV=()

# The Job's pod spec (JSON) from a multi-document manifest.
pods_spec() {
  yq -c 'select(.kind == "Job") | .spec.template.spec' "$1"
}

# "<job>-<i>" host name, "<subdomain>" and the namespace of the Job in MANIFEST.
pods_job_name() { yq -r 'select(.kind == "Job") | .metadata.name' "$1"; }
pods_subdomain() { yq -r 'select(.kind == "Job") | .spec.template.spec.subdomain // ""' "$1"; }
pods_namespace() { yq -r 'select(.kind == "Job") | .metadata.namespace // "default"' "$1"; }

# Address of pod I: its pod-network address, or its node's fabric address on the host network.
pods_address() {
  if [ "$2" = 1 ]; then lab_fabric_addr "$1"; else lab_pod_addr "$1"; fi
}

# The container's environment for pod INDEX at ADDRESS, one NAME=VALUE a line, as the kubelet
# sets it (JOB_COMPLETION_INDEX and HOSTNAME first; fieldRefs resolved). Fails on sources the lab
# cannot resolve (ConfigMap/Secret keys).
pods_env() {
  local manifest="$1" index="$2" address="$3" job
  job=$(pods_job_name "$manifest")
  echo "JOB_COMPLETION_INDEX=$index"
  echo "HOSTNAME=$job-$index"
  pods_spec "$manifest" | jq -r --arg idx "$index" --arg ip "$address" --arg pod "$job-$index" \
    --arg node "node-$index" '
    .containers[0].env // [] | .[] |
    if has("valueFrom") | not then "\(.name)=\(.value // "")"
    elif .valueFrom.fieldRef then
      (.valueFrom.fieldRef.fieldPath) as $p |
      if $p == "metadata.annotations[\u0027batch.kubernetes.io/job-completion-index\u0027]"
        then "\(.name)=\($idx)"
      elif $p == "status.podIP" or $p == "status.hostIP" then "\(.name)=\($ip)"
      elif $p == "metadata.name" then "\(.name)=\($pod)"
      elif $p == "spec.nodeName" then "\(.name)=\($node)"
      else error("env \(.name): fieldRef \($p) is not emulated by the lab") end
    else error("env \(.name): \(.valueFrom | keys[0]) is not emulated by the lab") end'
}

# The container's argv (command + args) for pod INDEX, one argument a line, with $(VAR) expanded
# from the pod's env as Kubernetes does; a leading "chexscale" becomes BIN.
pods_argv() {
  local manifest="$1" index="$2" address="$3" bin="$4" env_text env_json
  env_text=$(pods_env "$manifest" "$index" "$address") || return 1
  env_json=$(jq -R -s 'split("\n") | map(select(length > 0) | capture("^(?<k>[^=]*)=(?<v>.*)$"))
    | map({key: .k, value: .v}) | from_entries' <<<"$env_text") || return 1
  pods_spec "$manifest" | jq -r --argjson env "$env_json" --arg bin "$bin" '
    .containers[0] | ((.command // []) + (.args // [])) |
    map(gsub("\\$\\((?<v>[A-Za-z_][A-Za-z0-9_]*)\\)"; $env[.v] // "$(\(.v))")) |
    (if length > 0 and (.[0] == "chexscale" or (.[0] | endswith("/chexscale")))
       then .[0] = $bin else . end) | .[]'
}

# Makes every pod's namespace resolve the Job's DNS names (<job>-<i>.<subdomain>[.<ns>.svc...])
# to pod i's address, like the headless Service's DNS records (node addresses on the host network).
pods_resolve_service() {
  local manifest="$1" n="$2" host_network="$3" job sub nsname i lines=()
  job=$(pods_job_name "$manifest")
  sub=$(pods_subdomain "$manifest")
  nsname=$(pods_namespace "$manifest")
  mapfile -t lines < <(lab_base_hosts "$n")
  for ((i = 0; i < n; i++)); do
    local addr names="$job-$i"
    addr=$(pods_address "$i" "$host_network")
    [ -n "$sub" ] && names+=" $job-$i.$sub $job-$i.$sub.$nsname.svc $job-$i.$sub.$nsname.svc.cluster.local"
    lines+=("$addr $names")
  done
  for ((i = 0; i < n; i++)); do
    if [ "$host_network" = 1 ]; then
      lab_write_hosts "$(lab_node_ns "$i")" "${lines[@]}"
    else
      lab_write_hosts "$(lab_pod_ns "$i")" "${lines[@]}"
    fi
  done
}

# Runs pod INDEX of MANIFEST in namespace NS (foreground) and logs its argv to COMMANDS_LOG.
pods_run() {
  local manifest="$1" index="$2" ns="$3" host_network="$4" bin="$5" timeout_s="$6" commands_log="$7"
  local address env_text argv_text env_lines argv
  address=$(pods_address "$index" "$host_network")
  env_text=$(pods_env "$manifest" "$index" "$address") || lab_die "$manifest: cannot build pod $index's env"
  argv_text=$(pods_argv "$manifest" "$index" "$address" "$bin") || lab_die "$manifest: cannot build pod $index's command"
  mapfile -t env_lines <<<"$env_text"
  mapfile -t argv <<<"$argv_text"
  [ "${#argv[@]}" -gt 0 ] || lab_die "$manifest: the Job's container has no command"
  echo "[$ns] ${env_lines[*]} ${POD_EXTRA_ENV[*]} ${argv[*]}" >>"$commands_log"
  cd /tmp
  lab_netns_exec "$ns" env -i PATH="$(dirname "$bin"):/usr/local/bin:/usr/bin:/bin" "${env_lines[@]}" \
    "${POD_EXTRA_ENV[@]}" timeout -k 10 "$timeout_s" "${argv[@]}"
}

# Runs pod INDEX of MANIFEST (N pods) as a container of the manifest's image joined to the
# network namespace NS (`--network ns:/run/netns/NS`), in the foreground, and logs the engine's
# argv to COMMANDS_LOG. Security context, env, volumes and limits come from pod_container_argv
# (lab/pod_containers.sh); ROOT holds the pods' volumes (ROOT/pvc/<claim>). The Service's names
# resolve through --add-host. The container is removed afterwards.
pods_run_container() {
  local manifest="$1" index="$2" n="$3" ns="$4" host_network="$5" root="$6" timeout_s="$7"
  local commands_log="$8" i name argv_text argv addresses=() hosts=() rc=0
  for ((i = 0; i < n; i++)); do addresses+=("$(pods_address "$i" "$host_network")"); done
  mapfile -t hosts < <(pod_containers_hosts "$manifest" "${addresses[@]}")
  argv_text=$(pod_container_argv "$manifest" "$index" "${addresses[$index]}" "$root" \
    --network "ns:/run/netns/$ns" "${hosts[@]}") || lab_die "$manifest: cannot build pod $index's container"
  mapfile -t argv <<<"$argv_text"
  name="${POD_CONTAINERS_PREFIX:-chx-}$(pods_job_name "$manifest")-$index"
  "$CONTAINER_ENGINE" rm -f "$name" >/dev/null 2>&1 || true
  echo "[$ns] $CONTAINER_ENGINE ${argv[*]}" >>"$commands_log"
  timeout -k 10 "$timeout_s" "$CONTAINER_ENGINE" "${argv[@]}" || rc=$?
  "$CONTAINER_ENGINE" rm -f "$name" >/dev/null 2>&1 || true
  return "$rc"
}
