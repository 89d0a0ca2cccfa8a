#!/bin/sh
# The first step of `make test`: stops it at once, before anything is installed or built, unless
# it runs as root. The tests create network namespaces, mount tmpfs file systems and start Slurm's
# daemons, and each of those needs root.
uid=$(id -u)
if [ "$uid" -ne 0 ]; then
  echo "make test: the tests must run as root (they create network namespaces, mount tmpfs" \
    "and start Slurm daemons); this is uid $uid ($(id -un 2>/dev/null || echo unknown))." \
    "Run it as root, e.g. sudo make test" >&2
  exit 1
fi
