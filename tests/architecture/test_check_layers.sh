#!/usr/bin/env bash
# Tests check_layers.sh on small made-up trees: a clean one passes; upward and sideways includes
# (quoted or angled, in a header or a source) fail, each named by file:line and its edge.
# Usage: test_check_layers.sh CHECK_LAYERS_SH
set -euo pipefail

check=${1:?usage: test_check_layers.sh CHECK_LAYERS_SH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# write FILE LINE...: a file of the fake tree, one argument per line.
write() {
  local file=$tmp/src/$1
  shift
  mkdir -p "$(dirname "$file")"
  printf '%s\n' "$@" >"$file"
}

write common/error.h '#pragma once' '#include <string>'
write models/net.h '#pragma once' '#include "common/error.h"' '#include "models/layer.h"'
write models/layer.h '#pragma once'
write train/step.cpp '#include "train/step.h"' '#include "models/net.h"' '#include <vector>'
write train/step.h '#pragma once'
write cli/main.cpp '#include "train/step.h"' '#include "common/error.h"'

if ! out=$(bash "$check" "$tmp/src" 2>&1); then
  fail "a clean tree was refused: $out"
fi

# expect_refused NAME TEXT...: the checker fails and its output holds every TEXT.
expect_refused() {
  local name=$1
  shift
  local out rc=0
  out=$(bash "$check" "$tmp/src" 2>&1) || rc=$?
  if ((rc == 0)); then
    fail "$name: passed: $out"
    return
  fi
  for text in "$@"; do
    [[ $out == *"$text"* ]] || fail "$name: output does not say '$text': $out"
  done
}

# A header-only upward include: common/error.h includes a header of models (line 3).
write common/error.h '#pragma once' '#include <string>' '#include "models/net.h"'
expect_refused "upward include" "$tmp/src/common/error.h:3:" "common -> models" "models/net.h"
write common/error.h '#pragma once' '#include <string>'

# A sideways include, with angle brackets: models may not include data.
write models/layer.h '#pragma once' '#include <data/batch.h>'
expect_refused "sideways include" "$tmp/src/models/layer.h:2:" "models -> data" "data/batch.h"
write models/layer.h '#pragma once'

# train below cli: a source file of train may not include cli.
write train/step.cpp '#include "train/step.h"' '#include "cli/command.h"'
expect_refused "include of cli" "$tmp/src/train/step.cpp:2:" "train -> cli"
write train/step.cpp '#include "train/step.h"'

# A folder that is no layer is refused rather than left unchecked.
write plugins/x.h '#include "cli/main.h"'
expect_refused "unknown layer" "$tmp/src/plugins: not a known layer"
rm -r "$tmp/src/plugins"

if ! out=$(bash "$check" "$tmp/src" 2>&1); then
  fail "the tree, repaired, was refused: $out"
fi

if ((failures > 0)); then
  echo "test_check_layers: $failures failure(s)"
  exit 1
fi
echo "test_check_layers: all cases passed"
