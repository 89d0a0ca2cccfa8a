# The container engine and the flags it needs here; sourced by scripts/base-image.sh,
# deploy/docker/build-image.sh and lab/pod_containers.sh. Docker when its daemon answers, else
# podman (CONTAINER_ENGINE overrides). podman on these machines runs with runc (crun refuses their
# hybrid cgroup layout), fixed ulimits (no CAP_SYS_RESOURCE to raise them to the defaults) and, for
# builds, the host network (RUN steps reach the Debian mirror directly) and the Docker image format
# (the OCI format has no SHELL, which the Dockerfile sets).
if [ -z "${CONTAINER_ENGINE:-}" ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    CONTAINER_ENGINE=docker
  else
    CONTAINER_ENGINE=podman
  fi
fi
command -v "$CONTAINER_ENGINE" >/dev/null 2>&1 || {
  echo "no container engine: $CONTAINER_ENGINE is not installed (make deps-image)" >&2
  return 1 2>/dev/null || exit 1
}
if [ "$CONTAINER_ENGINE" = podman ]; then
  ENGINE_RUN_FLAGS=(--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
  ENGINE_BUILD_FLAGS=("${ENGINE_RUN_FLAGS[@]}" --network host --format docker)
else
  ENGINE_RUN_FLAGS=()
  ENGINE_BUILD_FLAGS=(--network host)
fi
