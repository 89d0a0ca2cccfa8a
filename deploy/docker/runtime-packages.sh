#!/usr/bin/env bash
# Prints the Debian packages that provide the shared libraries a binary links (via ldd), one per
# line, so a runtime image installs exactly those. Libraries outside dpkg (e.g. an official
# LibTorch under /opt) are skipped: the image copies them itself.
# Usage: runtime-packages.sh BINARY > packages.txt
set -euo pipefail
binary="$1"
for lib in $(ldd "$binary" | awk '/=> \//{print $3}'); do
  real="$(realpath "$lib")"
  # merged /usr: dpkg may know a library under /lib or /usr/lib; try the name as linked first.
  dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true
done | grep -v '^diversion' | cut -d: -f1 | sort -u
# BLAS is reached through the alternatives symlink libblas.so.3; keep the fast OpenMP OpenBLAS.
echo libopenblas0-openmp
