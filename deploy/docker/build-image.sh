#!/usr/bin/env bash
# Builds the CPU image (deploy/docker/Dockerfile) as chexscale:<version>, making the base image
# first when it is missing (scripts/base-image.sh). The build reuses the engine's layer cache, so
# an unchanged tree rebuilds in seconds. Its compiles go through ccache: under podman the host's
# own cache, mounted, with the host's locale variables (ccache hashes them), so that what
# `make build` compiled here is not compiled again; under docker, or with
# CHEXSCALE_IMAGE_CCACHE=engine, the engine's cache mount.
# Usage: deploy/docker/build-image.sh [TAG]   (default chexscale:<project version>)
# IMAGE_CONTEXT: the source tree to build (default: this checkout), e.g. an export of one commit.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
version="$(sed -n 's/^project(chexscale VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
tag="${1:-chexscale:$version}"
# shellcheck source=engine.sh
source deploy/docker/engine.sh
bash scripts/base-image.sh
# BuildKit reads <Dockerfile>.dockerignore by itself; podman is told.
ignore=()
[ "$CONTAINER_ENGINE" = podman ] && ignore=(--ignorefile "${IMAGE_CONTEXT:-$here}/deploy/docker/Dockerfile.dockerignore")
ccache_flags=()
if [ "$CONTAINER_ENGINE" = podman ] && [ "${CHEXSCALE_IMAGE_CCACHE:-host}" = host ] &&
  command -v ccache >/dev/null 2>&1; then
  host_cache="$(ccache --get-config cache_dir)"
  mkdir -p "$host_cache"
  locale=()
  for name in LANG LC_ALL LC_CTYPE LC_MESSAGES; do
    if [ -n "${!name:-}" ]; then locale+=("$name=${!name}"); fi
  done
  ccache_flags=(--volume "$host_cache:/host-ccache" --build-arg HOST_CCACHE_DIR=/host-ccache
    --build-arg "HOST_LOCALE=${locale[*]}")
  echo "build-image: compiling through the host's ccache ($host_cache)"
fi
start=$(date +%s)
context="${IMAGE_CONTEXT:-$here}"
"$CONTAINER_ENGINE" build "${ENGINE_BUILD_FLAGS[@]}" "${ignore[@]}" "${ccache_flags[@]}" \
  -f "$context/deploy/docker/Dockerfile" -t "$tag" "$context"
echo "build-image: $tag built in $(($(date +%s) - start)) s," \
  "$("$CONTAINER_ENGINE" image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
