#!/usr/bin/env bash
# `make test` run by a user other than root stops at once with the line saying the tests need
# root and a non-zero status, before it installs or builds anything; run by root, the check
# passes. The Makefile and the check run from a copy (as `nobody`, who may not read the checkout),
# with make -n's dry run proving which recipes would run after the check.
# Usage: test_require_root.sh SOURCE_DIR
set -euo pipefail

src=${1:?usage: test_require_root.sh SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

[ "$(id -u)" -eq 0 ] || { echo "FAIL: this test switches to nobody, so it runs as root"; exit 1; }
mkdir -p "$tmp/tree/scripts"
cp "$src/Makefile" "$tmp/tree/"
cp "$src/scripts/require-root.sh" "$tmp/tree/scripts/"
# The steps after the check, which must not run: each leaves a mark when it does.
for script in install-deps.sh check-test-room.sh; do
  printf '#!/bin/sh\ntouch "%s/ran-%s"\n' "$tmp" "$script" >"$tmp/tree/scripts/$script"
done
chmod -R a+rX "$tmp"
chmod a+w "$tmp"

as_nobody() {
  setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "$@"
}

rc=0
out=$(cd "$tmp/tree" && as_nobody make test 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "make test as nobody exited 0: $out"
nobody_uid=$(id -u nobody)
expected="make test: the tests must run as root (they create network namespaces, mount tmpfs and start Slurm daemons); this is uid $nobody_uid (nobody). Run it as root, e.g. sudo make test"
case "$out" in
  *"$expected"*) ;;
  *) fail "make test as nobody did not say the tests need root; it printed: $out" ;;
esac
for script in install-deps.sh check-test-room.sh; do
  [ ! -e "$tmp/ran-$script" ] || fail "make test as nobody ran $script after the root check"
done
case "$out" in
  *cmake* | *ctest* | *format-check*) fail "make test as nobody went on past the check: $out" ;;
esac

# The check alone, as nobody: status 1, the message on stderr, nothing on stdout.
rc=0
stdout=$(as_nobody sh "$tmp/tree/scripts/require-root.sh" 2>"$tmp/stderr") || rc=$?
[ "$rc" -eq 1 ] || fail "require-root.sh as nobody exited $rc, not 1"
[ -z "$stdout" ] || fail "require-root.sh wrote to stdout: $stdout"
grep -qF "$expected" "$tmp/stderr" || fail "require-root.sh's stderr: $(cat "$tmp/stderr")"

# As root the check passes silently, and make test goes on to its next step (dry run: printed,
# not run).
rc=0
out=$(sh "$tmp/tree/scripts/require-root.sh" 2>&1) || rc=$?
[ "$rc" -eq 0 ] && [ -z "$out" ] || fail "require-root.sh as root: exit $rc, output '$out'"
plan=$(cd "$tmp/tree" && make -n test 2>&1) || fail "make -n test as root failed: $plan"
first=$(printf '%s\n' "$plan" | head -1)
[ "$first" = "sh scripts/require-root.sh" ] || fail "make test's first step is not the root check: $plan"
printf '%s\n' "$plan" | grep -q 'MAKE\|make' || fail "make test as root stops after the check: $plan"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS: make test stops at once for nobody (uid $nobody_uid) with the root message"
