#!/usr/bin/env bash
# Makes the Debian 12 base image that deploy/docker/Dockerfile builds FROM (its DEBIAN_IMAGE tag)
# without a registry: mmdebstrap assembles a minimal bookworm from the Debian mirror and
# `podman import` (docker import where docker is the engine, see deploy/docker/engine.sh) stores it under that tag. Does
# nothing when the tag already exists. Slim like Debian's own -slim images: no docs, man pages or
# locales, apt without recommends.
# Usage: scripts/base-image.sh [TAG]   (default: the Dockerfile's DEBIAN_IMAGE)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tag="${1:-$(sed -n 's/^ARG DEBIAN_IMAGE=//p' "$here/deploy/docker/Dockerfile")}"
[ -n "$tag" ] || { echo "base-image: no ARG DEBIAN_IMAGE= in deploy/docker/Dockerfile" >&2; exit 1; }
# shellcheck source=../deploy/docker/engine.sh
source "$here/deploy/docker/engine.sh"
engine="$CONTAINER_ENGINE"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

if "$engine" image inspect "$tag" >/dev/null 2>&1; then
  echo "base-image: $tag exists"
  exit 0
fi
command -v mmdebstrap >/dev/null || { echo "base-image: mmdebstrap is missing (make deps-image)" >&2; exit 1; }

tarball="$(mktemp --suffix=.tar)"
trap 'rm -f "$tarball"' EXIT
echo "base-image: mmdebstrap bookworm from $mirror"
mmdebstrap --variant=minbase --quiet \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
  bookworm "$tarball" \
  "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
  "deb $security_mirror bookworm-security main"
"$engine" import --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
echo "base-image: imported $tag ($(du -h "$tarball" | cut -f1) tar)"
