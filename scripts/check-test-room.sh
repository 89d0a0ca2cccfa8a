#!/bin/sh
# Warns before `make test` when the temporary folder (TMPDIR, else /tmp) has less room than the
# test suite takes at its peak: two tests at a time, each writing ResNet-18 checkpoints of about
# 130-230 MB, took 4.2 GiB at once (measured with `df` during a full run). A full disk then shows
# as tests failing with "no space for ..." errors, not as a crash.
need_gib=6
dir="${TMPDIR:-/tmp}"
free_kib=$(df -Pk "$dir" 2>/dev/null | awk 'NR == 2 { print $4 }')
[ -n "$free_kib" ] || exit 0
if [ "$free_kib" -lt $((need_gib * 1024 * 1024)) ]; then
  echo "make test: warning: $dir has $((free_kib / 1024)) MiB free; the tests need about" \
    "$need_gib GiB at their peak, so some may fail with 'no space' errors (free room there or" \
    "set TMPDIR to a roomier folder)" >&2
fi
exit 0
