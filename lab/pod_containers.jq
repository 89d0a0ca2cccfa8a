# The container engine flags for the pod of a rendered Indexed Job (lab/pod_containers.sh runs
# it with the Job object as input). Every field the renderer can emit is mapped to a flag, or
# ignored for the reason written next to it; any other field or value is an error, so a manifest
# the containers cannot honour fails instead of running differently.
# Output: {"errors": [...], "flags": [...], "image": ..., "exit_rules": [...],
# "deadline": S or null, "stop_timeout": S, "volumes": [...]}
# where volumes lists the host folders under $root the caller provides (pvc/<claim>,
# configmap/<name>).

# Errors for the keys of OBJECT not in ALLOWED, named under WHERE.
def unknown_keys($where; $allowed):
  (keys - $allowed) | map("\($where).\(.): not mapped to the containers");

# A Kubernetes quantity (8Gi, 500Mi, 2G, 1024) as bytes.
def bytes:
  tostring | capture("^(?<n>[0-9.]+)(?<u>[KMGTE]i?|k)?$") as $q
  | ($q.n | tonumber) * ({"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
      "Ki": 1024, "Mi": 1048576, "Gi": 1073741824, "Ti": 1099511627776}[$q.u // ""])
  | floor;

# CPU quantity (2, 500m) as a number of CPUs.
def cpus: tostring | if endswith("m") then (rtrimstr("m") | tonumber) / 1000 else tonumber end;

. as $job
| $job.spec as $spec
| $spec.template.spec as $pod
| ($pod.containers // []) as $containers
| $containers[0] as $c
| ($pod.securityContext // {}) as $psc
| ($c.securityContext // {}) as $csc
| (($csc.runAsUser // $psc.runAsUser) | tostring) as $uid
| (($csc.runAsGroup // $psc.runAsGroup // $psc.runAsUser) | tostring) as $gid
| ($pod.volumes // [] | map({key: .name, value: .}) | from_entries) as $volumes
| {
  errors: (
    [ if $job.apiVersion != "batch/v1" or $job.kind != "Job" then
        "\($job.kind): only a batch/v1 Job is run as containers" else empty end ]
    # metadata: the name makes the pods' host names; labels and annotations select objects for
    # the Service and NetworkPolicy, which the caller's network stands in for.
    + ($job.metadata | unknown_keys("metadata"; ["name", "namespace", "labels", "annotations"]))
    + ($spec | unknown_keys("spec"; ["completionMode", "completions", "parallelism",
        "backoffLimit", "podFailurePolicy", "activeDeadlineSeconds", "ttlSecondsAfterFinished",
        "template"]))
    + [ if $spec.completionMode != "Indexed" then "spec.completionMode: only Indexed" else empty end,
        if $spec.parallelism != $spec.completions then
          "spec.parallelism \($spec.parallelism) != completions \($spec.completions): the pods of a distributed job run at once"
        else empty end,
        # ttlSecondsAfterFinished: the runner removes the containers when the job ends.
    # A failed pod is never retried: the job fails (the runner has no retries).
        if ($spec.backoffLimit // 6) != 0 then "spec.backoffLimit: only 0 (no retries)" else empty end ]
    # podFailurePolicy: the onExitCodes rules apply to each pod's exit status (exit_rules below).
    # An onPodConditions rule on DisruptionTarget never fires: nothing evicts or preempts a
    # container here.
    + [ ($spec.podFailurePolicy // {} | unknown_keys("spec.podFailurePolicy"; ["rules"]))[],
        (($spec.podFailurePolicy.rules // [])[] as $r
         | ($r | unknown_keys("spec.podFailurePolicy rule \($r | tojson)"; ["action", "onExitCodes", "onPodConditions"]))[],
           (if $r.action | IN("FailJob", "Ignore", "Count") | not then
              "spec.podFailurePolicy rule \($r | tojson): action \($r.action) is not applied" else empty end),
           (if $r.onPodConditions and ($r.onPodConditions | map(.type) != ["DisruptionTarget"]) then
              "spec.podFailurePolicy rule \($r | tojson): only the DisruptionTarget condition" else empty end),
           (if $r.onExitCodes and (($r.onExitCodes.containerName // $c.name) != $c.name
                or ($r.onExitCodes.operator | IN("In", "NotIn") | not)) then
              "spec.podFailurePolicy rule \($r | tojson): exit codes of another container or operator" else empty end)) ]
    + ($spec.template | unknown_keys("spec.template"; ["metadata", "spec"]))
    + ($spec.template.metadata // {} | unknown_keys("spec.template.metadata"; ["labels", "annotations"]))
    # schedulerName: one host, every container starts at once (a gang by construction).
    # nodeSelector, tolerations: one host, no nodes to select and no taints.
    # hostNetwork, dnsPolicy: the caller's network flags (--network host or the node's
    # namespace) and --add-host stand for them. subdomain: the pods' DNS names (--add-host).
    + ($pod | unknown_keys("pod"; ["restartPolicy", "automountServiceAccountToken",
        "enableServiceLinks", "securityContext", "terminationGracePeriodSeconds", "schedulerName",
        "nodeSelector", "tolerations", "hostNetwork", "dnsPolicy", "subdomain", "containers",
        "volumes"]))
    + [ if $pod.restartPolicy != "Never" then "pod.restartPolicy: only Never" else empty end,
        # The engine mounts no service account token; the manifest must not expect one.
        if $pod.automountServiceAccountToken != false then
          "pod.automountServiceAccountToken: must be false (no token is mounted)" else empty end,
        if $pod.enableServiceLinks != false then
          "pod.enableServiceLinks: must be false (no service variables are set)" else empty end,
        if ($containers | length) != 1 then "pod.containers: exactly one container" else empty end ]
    + ($psc | unknown_keys("pod.securityContext"; ["runAsNonRoot", "runAsUser", "runAsGroup",
        "fsGroup", "seccompProfile"]))
    + [ if ($psc.seccompProfile.type // "RuntimeDefault") | IN("RuntimeDefault", "Unconfined") | not
        then "pod.securityContext.seccompProfile.type \($psc.seccompProfile.type): only RuntimeDefault or Unconfined"
        else empty end,
        if $uid == "null" then "securityContext.runAsUser: not set (the image's user is not assumed)"
        elif (($csc.runAsNonRoot // $psc.runAsNonRoot) == true) and $uid == "0" then
          "securityContext: runAsNonRoot with runAsUser 0" else empty end ]
    + ($c | unknown_keys("container"; ["name", "image", "imagePullPolicy", "command", "args", "env",
        "ports", "resources", "securityContext", "volumeMounts"]))
    # Only what is on this host runs: there is no registry to pull from.
    + [ if ($c.imagePullPolicy // "IfNotPresent") | IN("IfNotPresent", "Never") | not then
          "container.imagePullPolicy \($c.imagePullPolicy): no registry, only IfNotPresent or Never"
        else empty end ]
    # ports: containers on one network reach each other's ports directly; nothing is published.
    + ($c.resources // {} | unknown_keys("container.resources"; ["requests", "limits"]))
    # requests only place a pod on a node: one host, nothing to place.
    + ($c.resources.requests // {} | unknown_keys("container.resources.requests"; ["cpu", "memory"]))
    + ($c.resources.limits // {} | unknown_keys("container.resources.limits"; ["cpu", "memory"]))
    + ($csc | unknown_keys("container.securityContext"; ["allowPrivilegeEscalation", "privileged",
        "readOnlyRootFilesystem", "runAsNonRoot", "runAsUser", "runAsGroup", "capabilities"]))
    + ($csc.capabilities // {} | unknown_keys("container.securityContext.capabilities"; ["drop", "add"]))
    + [ ($c.volumeMounts // [])[] as $m
        | ($m | unknown_keys("container.volumeMounts[\($m.name)]"; ["name", "mountPath", "readOnly"]))[],
          (if $volumes[$m.name] == null then "container.volumeMounts[\($m.name)]: no such volume" else empty end) ]
    + [ ($pod.volumes // [])[] as $v
        | ($v | unknown_keys("pod.volumes[\($v.name)]"; ["name", "emptyDir", "persistentVolumeClaim", "configMap"]))[],
          ($v.emptyDir // {} | unknown_keys("pod.volumes[\($v.name)].emptyDir"; ["medium", "sizeLimit"]))[],
          ($v.persistentVolumeClaim // {} | unknown_keys("pod.volumes[\($v.name)].persistentVolumeClaim"; ["claimName", "readOnly"]))[],
          ($v.configMap // {} | unknown_keys("pod.volumes[\($v.name)].configMap"; ["name"]))[],
          (if ($v.emptyDir.medium // "") | IN("", "Memory") | not then
             "pod.volumes[\($v.name)].emptyDir.medium \($v.emptyDir.medium): only Memory or the default" else empty end) ]
  ),
  image: $c.image,
  # What a pod's non-zero exit status does, in order, the first match wins (no match: Count,
  # which with backoffLimit 0 fails the job): FailJob and Count fail the job and stop the other
  # pods, Ignore starts the pod again (the Job controller's replacement pod).
  exit_rules: [ ($spec.podFailurePolicy.rules // [])[] | select(.onExitCodes)
                | {action, operator: .onExitCodes.operator, values: .onExitCodes.values} ],
  # activeDeadlineSeconds bounds the whole job (the runner's timeout).
  deadline: $spec.activeDeadlineSeconds,
  stop_timeout: ($pod.terminationGracePeriodSeconds // 30),
  volumes: [ ($c.volumeMounts // [])[] as $m | $volumes[$m.name]
             | select(.persistentVolumeClaim or .configMap)
             | if .persistentVolumeClaim then {kind: "pvc", name: .persistentVolumeClaim.claimName}
               else {kind: "configmap", name: .configMap.name} end ],
  flags: (
    [ "--pull=never", "--restart=no", "--stop-timeout", ($pod.terminationGracePeriodSeconds // 30 | tostring),
      "--user", "\($uid):\($gid)" ]
    + (if $psc.fsGroup then ["--group-add", ($psc.fsGroup | tostring)] else [] end)
    + (if ($psc.seccompProfile.type // "RuntimeDefault") == "Unconfined"
       then ["--security-opt", "seccomp=unconfined"] else [] end)
    # The root is read-only and nothing else is writable: no engine tmpfs on /tmp, /run, /var/tmp.
    + (if $csc.readOnlyRootFilesystem == true then ["--read-only", "--read-only-tmpfs=false"] else [] end)
    + (if $csc.allowPrivilegeEscalation == false then ["--security-opt", "no-new-privileges"] else [] end)
    + (if $csc.privileged == true then ["--privileged"] else [] end)
    + [ ($csc.capabilities.drop // [])[] | "--cap-drop", . ]
    + [ ($csc.capabilities.add // [])[] | "--cap-add", . ]
    + (if $c.resources.limits.memory then ["--memory", ($c.resources.limits.memory | bytes | tostring)] else [] end)
    + (if $c.resources.limits.cpu then ["--cpus", ($c.resources.limits.cpu | cpus | tostring)] else [] end)
    # emptyDir: a tmpfs as writable as Kubernetes' (mode 1777), sized by sizeLimit when given.
    + [ ($c.volumeMounts // [])[] as $m | $volumes[$m.name] as $v
        | if $v.emptyDir then
            "--tmpfs", "\($m.mountPath):rw,mode=1777\(if $v.emptyDir.sizeLimit then ",size=\($v.emptyDir.sizeLimit | bytes)" else "" end)"
          elif $v.persistentVolumeClaim then
            "--volume", "\($root)/pvc/\($v.persistentVolumeClaim.claimName):\($m.mountPath):\(if $m.readOnly or $v.persistentVolumeClaim.readOnly then "ro" else "rw" end)"
          elif $v.configMap then
            "--volume", "\($root)/configmap/\($v.configMap.name):\($m.mountPath):ro"
          else empty end ]
  )
}
