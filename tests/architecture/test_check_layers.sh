#!/usr/bin/env bash
# Tests check_layers.sh on small made-up trees: a clean one (with the rooms of data/) passes;
# upward and sideways includes (quoted or angled, in a header or a source), a room including the
# top of its layer or a room it may not, an unknown room and two files including each other
# fail, each named by file:line and its edge.
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
write cli/main.cpp '#include "train/step.h"' '#include "common/error.h"' '#include "data/loader.h"'
# data/ with rooms: the top includes any room; a room its own headers and the rooms below it.
write data/loader.h '#pragma once' '#include "data/shards/reader.h"' '#include "data/image/png.h"'
write data/image/png.h '#pragma once' '#include "common/error.h"'
write data/labels/labels.h '#pragma once'
write data/datasets/csv.h '#pragma once' '#include "data/labels/labels.h"'
write data/shards/reader.h '#pragma once' '#include "data/datasets/csv.h"' '#include "data/image/png.h"'
write data/shards/reader.cpp '#include "data/shards/reader.h"' '#include "data/labels/labels.h"'
write data/synthetic/make.cpp '#include "data/image/png.h"' '#include "data/datasets/csv.h"'

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

# A room may not include the top of its layer.
write data/image/png.h '#pragma once' '#include "common/error.h"' '#include "data/loader.h"'
expect_refused "room includes its layer's top" "$tmp/src/data/image/png.h:3:" \
  "data/image -> the top of data" "data/loader.h"
write data/image/png.h '#pragma once' '#include "common/error.h"'

# A room may include only the rooms below it: datasets may not include shards.
write data/datasets/csv.h '#pragma once' '#include "data/labels/labels.h"' \
  '#include <data/shards/reader.h>'
expect_refused "room includes a room above it" "$tmp/src/data/datasets/csv.h:3:" \
  "data/datasets -> data/shards" "(datasets may include: labels)"
write data/datasets/csv.h '#pragma once' '#include "data/labels/labels.h"'

# A folder of a layer that is no room is refused rather than left unchecked.
write data/extras/x.h '#pragma once'
expect_refused "unknown room" "$tmp/src/data/extras: not a known room of data"
rm -r "$tmp/src/data/extras"

# Two files of one room that include each other: each edge named by file:line.
write data/labels/labels.h '#pragma once' '#include "data/labels/names.h"'
write data/labels/names.cpp '#include "data/labels/names.h"' '#include "data/labels/labels.h"'
write data/labels/names.h '#pragma once'
expect_refused "files including each other" "$tmp/src/data/labels/labels.h:2:" \
  "$tmp/src/data/labels/names.cpp:2" "data/labels/labels and data/labels/names include each other"
write data/labels/names.cpp '#include "data/labels/names.h"'

# Across layers too: a header of train and one of cli, cli including train's (allowed) and
# train's including cli's (refused as upward and as a pair).
write cli/command.h '#pragma once' '#include "train/step.h"'
write train/step.h '#pragma once' '#include "cli/command.h"'
expect_refused "pair across layers" "$tmp/src/train/step.h:2:" "train -> cli" \
  "cli/command and train/step include each other"
write train/step.h '#pragma once'
rm "$tmp/src/cli/command.h"

if ! out=$(bash "$check" "$tmp/src" 2>&1); then
  fail "the tree, repaired, was refused: $out"
fi

if ((failures > 0)); then
  echo "test_check_layers: $failures failure(s)"
  exit 1
fi
echo "test_check_layers: all cases passed"
