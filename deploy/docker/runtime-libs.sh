#!/usr/bin/env bash
# Copies the shared libraries a binary links (ldd: the whole closure, LibTorch's included) into
# OUT at the paths the loader finds them, with each package's copyright file, so that a runtime
# image holds exactly those and none of their packages' other files or dependencies (LibTorch's
# Debian package alone pulls perl, LLVM and Mesa). Skips what the base image already has (the
# packages in BASE_STATUS, the bare base image's dpkg status file) and libraries no package owns
# (e.g. an official LibTorch under /opt, which the image copies itself). Fails on a library
# ldd cannot find.
# Usage: runtime-libs.sh BINARY OUT BASE_STATUS
set -euo pipefail
binary="$1" out="$2" base_status="$3"
base_packages="$(awk '/^Package: /{print $2}' "$base_status")"
if ldd "$binary" | grep -q 'not found'; then
  echo "runtime-libs: $binary links libraries that are not found:" >&2
  ldd "$binary" | grep 'not found' >&2
  exit 1
fi
copied=0
while read -r soname path; do
  real="$(realpath "$path")"
  # merged /usr: dpkg may know a library under /lib or /usr/lib; try the name as linked first.
  owner="$(dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true)"
  package="$(grep -v '^diversion' <<<"$owner" | head -n 1 | cut -d: -f1)"
  [ -n "$package" ] || continue
  grep -qxF "$package" <<<"$base_packages" && continue
  # The soname in the loader's folder (/lib is /usr/lib here), as a regular file.
  install -D -m 0644 "$real" "$out$(realpath "$(dirname "$path")")/$soname"
  copyright="/usr/share/doc/$package/copyright"
  [ -f "$copyright" ] && install -D -m 0644 "$copyright" "$out$copyright"
  copied=$((copied + 1))
done < <(ldd "$binary" | awk '/=> \//{print $1, $3}')
echo "runtime-libs: $copied libraries ($(du -sh "$out" | cut -f1)) into $out"
