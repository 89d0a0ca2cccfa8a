#!/usr/bin/env bash
# A build meant to have the fuzz targets (CHEXSCALE_BUILD_FUZZ=ON, the default) stops at configure
# time when clang++ or its libFuzzer runtime is missing, with a message naming what to install and
# -DCHEXSCALE_BUILD_FUZZ=OFF; with that option the same machine configures. A clang++ whose
# runtimes are missing is the real clang++ pointed at an empty resource folder.
# Usage: test_fuzz_compiler_check.sh SOURCE_DIR GENERATOR CXX_COMPILER TORCH_DIR
set -euo pipefail

src=${1:?usage: test_fuzz_compiler_check.sh SOURCE_DIR GENERATOR CXX_COMPILER TORCH_DIR}
generator=$2 cxx=$3 torch_dir=$4
check=$src/fuzz/fuzz_compiler.cmake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# CMake wraps its messages: compare on one line with single spaces.
one_line() { tr -s ' \n' '  '; }
fix="Install clang and its libFuzzer and sanitizer runtimes (Debian 12: apt-get install clang libclang-rt-14-dev, which scripts/install-deps.sh installs), or configure with -DCHEXSCALE_BUILD_FUZZ=OFF to build without the fuzz targets."

# expect_stop NAME TEXT COMMAND...: COMMAND fails and its output holds TEXT and the fix.
expect_stop() {
  local name=$1 text=$2
  shift 2
  local out rc=0
  out=$("$@" 2>&1 | one_line) || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: exited 0: ...${out: -600}"
  [[ "$out" == *"$text"* ]] || fail "$name: no '$text' in: ...${out: -600}"
  [[ "$out" == *"$fix"* ]] || fail "$name: no advice on what to install in: ...${out: -600}"
}

mkdir -p "$tmp/empty-resources" "$tmp/no-clang" "$tmp/probe"
clang=$(command -v clang++) || { echo "FAIL: no clang++ (CHEXSCALE_BUILD_FUZZ is ON)"; exit 1; }
printf '#!/bin/sh\nexec %s -resource-dir %s "$@"\n' "$clang" "$tmp/empty-resources" \
  >"$tmp/clang++-without-runtimes"
chmod +x "$tmp/clang++-without-runtimes"

# The check alone: the real clang++ passes; none on the PATH, or one without runtimes, stops it.
(cd "$tmp/probe" && cmake -P "$check") >"$tmp/probe.log" 2>&1 ||
  fail "the check refused $clang: $(cat "$tmp/probe.log")"
grep -q "fuzz: libFuzzer targets built with" "$tmp/probe.log" || fail "$(cat "$tmp/probe.log")"
expect_stop "no clang++" "fuzz: no clang++ found to build the libFuzzer targets" \
  env -C "$tmp/probe" PATH="$tmp/no-clang" "$(command -v cmake)" -P "$check"
expect_stop "no runtimes" "cannot link a -fsanitize=fuzzer,address,undefined program" \
  env -C "$tmp/probe" cmake -DCHEXSCALE_CLANGXX="$tmp/clang++-without-runtimes" -P "$check"

# The whole project's configure: stops at the check; with -DCHEXSCALE_BUILD_FUZZ=OFF it succeeds.
configure() {
  cmake -S "$src" -B "$1" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" -DTorch_DIR="$torch_dir" \
    -DCHEXSCALE_CLANGXX="$tmp/clang++-without-runtimes" "${@:2}"
}
expect_stop "configure" "libclang_rt.fuzzer" configure "$tmp/build-fuzz"
[ ! -e "$tmp/build-fuzz/build.ninja" ] && [ ! -e "$tmp/build-fuzz/Makefile" ] ||
  fail "the failed configure generated a build system"
configure "$tmp/build-no-fuzz" -DCHEXSCALE_BUILD_FUZZ=OFF >"$tmp/no-fuzz.log" 2>&1 ||
  fail "configure with -DCHEXSCALE_BUILD_FUZZ=OFF failed: $(tail -20 "$tmp/no-fuzz.log")"
! grep -q "fuzz:" "$tmp/no-fuzz.log" || fail "-DCHEXSCALE_BUILD_FUZZ=OFF still checked the fuzzers"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS: the fuzz compiler check stops a configure without clang's runtimes, with its advice"
