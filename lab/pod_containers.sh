# Runs the pods of a rendered Indexed Job as containers of the chexscale image, the way the
# kubelet would: each pod's command, args and env (lab/pods.sh: fieldRefs resolved, $(VAR)
# expanded), its security context, volumes and limits as engine flags (lab/pod_containers.jq maps
# every field the renderer emits, or states why it is ignored; any other field is an error).
# Usage (bash; needs jq, yq and podman or docker, see deploy/docker/engine.sh):
#   source lab/pod_containers.sh
#   pod_containers_job MANIFEST ROOT ADDRESS_FN NETWORK_FN
# MANIFEST: the rendered objects in one multi-document file (ConfigMaps included). ROOT: a folder
# with pvc/<claimName>/ for every PersistentVolumeClaim the pods mount; the runner writes
# configmap/<name>/, logs/pod-<i>.log and inspect/pod-<i>.json (the engine's view of each
# container) there. ADDRESS_FN I prints pod I's address (its podIP); NETWORK_FN I prints pod I's
# network flags, one a line (e.g. --network NET and --ip ADDR, or --network ns:/run/netns/NAME).
# Container names are "${POD_CONTAINERS_PREFIX:-chx-}<job>-<i>"; the host name is <job>-<i>.
# The Job's podFailurePolicy judges each non-zero exit: a FailJob (or Count) fails the job with
# that status and stops the other pods; an Ignore starts the pod again. The Job's
# activeDeadlineSeconds, else POD_CONTAINERS_TIMEOUT (s, default 900), bounds it.
# The parts, for a caller that starts the pods itself (lab/pods.sh's pods_run_container):
# pod_containers_check MANIFEST, pod_containers_write_configmaps MANIFEST ROOT,
# pod_containers_hosts MANIFEST ADDRESS..., pod_container_argv MANIFEST INDEX ADDRESS ROOT EXTRA...

_pod_containers_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=pods.sh
source "$_pod_containers_dir/pods.sh"
# shellcheck source=../deploy/docker/engine.sh
source "$_pod_containers_dir/../deploy/docker/engine.sh"

# The Job object (JSON) of MANIFEST.
pod_containers_job_object() {
  yq -c 'select(.kind == "Job")' "$1"
}

# The plan of lab/pod_containers.jq for MANIFEST with volumes under ROOT.
pod_containers_plan() {
  pod_containers_job_object "$1" | jq -c --arg root "$2" -f "$_pod_containers_dir/pod_containers.jq"
}

# Fails, naming each one, when MANIFEST has fields the containers cannot honour.
pod_containers_check() {
  local errors
  errors=$(pod_containers_plan "$1" /nonexistent | jq -r '.errors[]') || return 1
  if [ -n "$errors" ]; then
    echo "$1: the containers cannot honour:" >&2
    sed 's/^/  /' <<<"$errors" >&2
    return 1
  fi
}

# The --add-host flags (one a line) that resolve the headless Service's DNS names of every pod
# (<job>-<i>, <job>-<i>.<subdomain>[.<ns>.svc[.cluster.local]]) to ADDRESS i.
pod_containers_hosts() {
  local manifest="$1" job sub nsname i
  shift
  job=$(pods_job_name "$manifest")
  sub=$(pods_subdomain "$manifest")
  nsname=$(pods_namespace "$manifest")
  i=0
  for addr in "$@"; do
    echo "--add-host" && echo "$job-$i:$addr"
    if [ -n "$sub" ]; then
      for name in "$job-$i.$sub" "$job-$i.$sub.$nsname.svc" "$job-$i.$sub.$nsname.svc.cluster.local"; do
        echo "--add-host" && echo "$name:$addr"
      done
    fi
    i=$((i + 1))
  done
}

# Writes every ConfigMap of MANIFEST as ROOT/configmap/<name>/<key> files.
pod_containers_write_configmaps() {
  local manifest="$1" root="$2" name key
  while read -r name; do
    [ -n "$name" ] || continue
    mkdir -p "$root/configmap/$name"
    while read -r key; do
      yq -r --arg name "$name" --arg key "$key" \
        'select(.kind == "ConfigMap" and .metadata.name == $name) | .data[$key]' "$manifest" \
        >"$root/configmap/$name/$key"
    done < <(yq -r --arg name "$name" 'select(.kind == "ConfigMap" and .metadata.name == $name) | .data | keys[]' "$manifest")
    chmod -R a+rX "$root/configmap/$name"
  done < <(yq -r 'select(.kind == "ConfigMap") | .metadata.name' "$manifest")
}

# The engine's arguments (one a line) that run pod INDEX of MANIFEST at ADDRESS with volumes
# under ROOT: `run`, the name, host name, the plan's flags, env, the engine's own flags
# (engine.sh), EXTRA (network and --add-host flags), the entrypoint, image and args.
pod_container_argv() {
  local manifest="$1" index="$2" address="$3" root="$4" job plan env_text argv_text
  shift 4
  job=$(pods_job_name "$manifest")
  plan=$(pod_containers_plan "$manifest" "$root") || return 1
  env_text=$(pods_env "$manifest" "$index" "$address") || return 1
  argv_text=$(pods_argv "$manifest" "$index" "$address" chexscale) || return 1
  [ -n "$argv_text" ] || { echo "$manifest: the Job's container has no command" >&2; return 1; }
  printf '%s\n' run --name "${POD_CONTAINERS_PREFIX:-chx-}$job-$index" --hostname "$job-$index"
  jq -r '.flags[]' <<<"$plan"
  while IFS= read -r line; do printf '%s\n' --env "$line"; done <<<"$env_text"
  printf '%s\n' "${ENGINE_RUN_FLAGS[@]}" "$@" --entrypoint "$(head -n 1 <<<"$argv_text")"
  jq -r '.image' <<<"$plan"
  tail -n +2 <<<"$argv_text"
}

# Starts container NAME in the background (its pid in _pod_container_pid) with ARGV (the engine's
# arguments, one a line), bounded by DEADLINE seconds, its output appended to LOG.
_pod_container_start() {
  local name="$1" deadline="$2" argv=()
  mapfile -t argv <<<"$3"
  "$CONTAINER_ENGINE" rm -f "$name" >/dev/null 2>&1 || true
  timeout -k 10 "$deadline" "$CONTAINER_ENGINE" "${argv[@]}" >>"$4" 2>&1 &
  _pod_container_pid=$!
}

# Runs the whole Job of MANIFEST (see the first comment); returns 0 when every pod exited 0.
pod_containers_job() {
  local manifest="$1" root="$2" address_fn="$3" network_fn="$4"
  local job n deadline plan i fs_group claim pids=() names=() addresses=() hosts=() status=0 failed=""
  pod_containers_check "$manifest" || return 1
  job=$(pods_job_name "$manifest")
  plan=$(pod_containers_plan "$manifest" "$root")
  n=$(pod_containers_job_object "$manifest" | jq -r '.spec.completions')
  deadline=$(jq -r --arg default "${POD_CONTAINERS_TIMEOUT:-900}" '.deadline // $default' <<<"$plan")
  mkdir -p "$root/logs" "$root/inspect"
  pod_containers_write_configmaps "$manifest" "$root"
  # fsGroup: like the kubelet, the claims' files become the group's, group-writable.
  fs_group=$(pod_containers_job_object "$manifest" | jq -r '.spec.template.spec.securityContext.fsGroup // empty')
  while read -r claim; do
    [ -n "$claim" ] || continue
    [ -d "$root/pvc/$claim" ] || { echo "$manifest: PVC $claim: no folder $root/pvc/$claim" >&2; return 1; }
    if [ -n "$fs_group" ]; then
      chgrp -R "$fs_group" "$root/pvc/$claim" && chmod -R g+rwX "$root/pvc/$claim" &&
        find "$root/pvc/$claim" -type d -exec chmod g+s {} + || return 1
    fi
  done < <(jq -r '.volumes[] | select(.kind == "pvc") | .name' <<<"$plan")
  for ((i = 0; i < n; i++)); do addresses+=("$("$address_fn" "$i")"); done
  mapfile -t hosts < <(pod_containers_hosts "$manifest" "${addresses[@]}")
  local argvs=()
  for ((i = 0; i < n; i++)); do
    local argv_text network=()
    mapfile -t network < <("$network_fn" "$i")
    argv_text=$(pod_container_argv "$manifest" "$i" "${addresses[$i]}" "$root" "${network[@]}" \
      "${hosts[@]}") || return 1
    argvs+=("$argv_text")
    names+=("${POD_CONTAINERS_PREFIX:-chx-}$job-$i")
    echo "[pod $i] $CONTAINER_ENGINE $(tr '\n' ' ' <<<"$argv_text")" >"$root/logs/pod-$i.log"
    _pod_container_start "${names[$i]}" "$deadline" "$argv_text" "$root/logs/pod-$i.log"
    pids+=("$_pod_container_pid")
  done
  # podFailurePolicy: each non-zero exit is judged by the Job's rules.
  local left=$n pid rc action
  while [ "$left" -gt 0 ]; do
    local running=()
    for pid in "${pids[@]}"; do [ -n "$pid" ] && running+=("$pid"); done
    rc=0
    wait -n -p pid "${running[@]}" || rc=$?
    for ((i = 0; i < n; i++)); do [ "${pids[$i]}" = "$pid" ] && break; done
    pids[i]=""
    echo "[pod $i] exit status $rc" >>"$root/logs/pod-$i.log"
    action=Succeeded
    [ "$rc" -eq 0 ] || action=$(jq -r --argjson rc "$rc" '[.exit_rules[]
      | select((.operator == "In") == (.values | index($rc) != null)) | .action][0] // "Count"' <<<"$plan")
    if [ "$action" = Ignore ] && [ -z "$failed" ]; then
      echo "[pod $i] recreated (podFailurePolicy: Ignore exit status $rc)" >>"$root/logs/pod-$i.log"
      _pod_container_start "${names[$i]}" "$deadline" "${argvs[$i]}" "$root/logs/pod-$i.log"
      pids[i]=$_pod_container_pid
      continue
    fi
    left=$((left - 1))
    if [ "$action" != Succeeded ] && [ -z "$failed" ]; then
      failed=$i
      status=$rc
      "$CONTAINER_ENGINE" stop --time "$(jq -r '.stop_timeout' <<<"$plan")" "${names[@]}" >/dev/null 2>&1 || true
    fi
  done
  for ((i = 0; i < n; i++)); do
    "$CONTAINER_ENGINE" inspect "${names[$i]}" >"$root/inspect/pod-$i.json" 2>/dev/null || true
    "$CONTAINER_ENGINE" rm -f "${names[$i]}" >/dev/null 2>&1 || true
  done
  [ -z "$failed" ] || echo "$manifest: pod $failed failed with status $status (logs: $root/logs)" >&2
  return "$status"
}
