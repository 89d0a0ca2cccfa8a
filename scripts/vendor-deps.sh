#!/usr/bin/env bash
# Downloads the Debian packages chexscale builds against (headers, CMake package files and
# their shared libraries) and unpacks them into third_party/debian/root, for a machine without
# network access (e.g. a GPU host with only CUDA and a pip torch). Run it here, with apt and
# network; cmake/Dependencies.cmake then finds them there before the system's. LibTorch is not
# included: the GPU machine brings its own (Torch_DIR, docs/gpu.md).
#
# Usage: scripts/vendor-deps.sh [DEST]      (default DEST: third_party/debian)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$here/third_party/debian}"

# What the build and its tests include and link (scripts/install-deps.sh's library part).
DEV_PACKAGES=(
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libspng-dev libpng-dev
  libdeflate-dev zlib1g-dev libgtest-dev libgmock-dev
)
# Provided by any Linux system with a C++ toolchain; never vendored.
BASE_RE='^(libc6|libgcc-s1|libstdc\+\+6|libc6-dev|libstdc\+\+-[0-9]+-dev|libc-dev|debconf)$'

# The dev packages plus the library packages they depend on (one level is enough here:
# libspdlog-dev -> libspdlog1.x, libfmt-dev -> libfmtN, libspng-dev -> libspng0, ...).
mapfile -t packages < <(
  {
    printf '%s\n' "${DEV_PACKAGES[@]}"
    apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
      --no-enhances "${DEV_PACKAGES[@]}" |
      awk '$1 == "Depends:" && $2 !~ /^</ { print $2 }'
  } | grep -Ev "$BASE_RE" | sort -u
)

rm -rf "$dest/debs" "$dest/root"
mkdir -p "$dest/debs" "$dest/root"
echo "vendor-deps: downloading ${#packages[@]} packages into $dest/debs"
(cd "$dest/debs" && apt-get download -qq "${packages[@]}")
for deb in "$dest"/debs/*.deb; do
  dpkg-deb -x "$deb" "$dest/root"
done
{
  echo "# Unpacked by scripts/vendor-deps.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ) from:"
  # shellcheck source=/dev/null
  . /etc/os-release && echo "# $PRETTY_NAME"
  for deb in "$dest"/debs/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done
} >"$dest/MANIFEST"
du -sh "$dest/root" | awk '{ print "vendor-deps: unpacked " $1 " into " $2 }'
echo "vendor-deps: glibc of this machine: $(ldd --version | head -1)"
echo "vendor-deps: the target machine needs at least this glibc (the libraries were built for it)"
