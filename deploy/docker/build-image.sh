#!/usr/bin/env bash
# Builds the CPU image (deploy/docker/Dockerfile) as chexscale:<version>, making the base image
# first when it is missing (scripts/base-image.sh). The build reuses the engine's layer cache and
# the build stage's ccache mount, so an unchanged tree rebuilds in seconds.
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
start=$(date +%s)
context="${IMAGE_CONTEXT:-$here}"
"$CONTAINER_ENGINE" build "${ENGINE_BUILD_FLAGS[@]}" "${ignore[@]}" \
  -f "$context/deploy/docker/Dockerfile" -t "$tag" "$context"
echo "build-image: $tag built in $(($(date +%s) - start)) s," \
  "$("$CONTAINER_ENGINE" image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
