#!/usr/bin/env bash
# Tests check_function_length.sh on a small made-up tree: a 60-line function passes and a 61-line
# one is refused by file:line, name and length, with braces inside strings, character literals,
# raw strings and comments that would shift either function's end if they were counted.
# Usage: test_check_function_length.sh CHECK_FUNCTION_LENGTH_SH
set -euo pipefail

check=${1:?usage: test_check_function_length.sh CHECK_FUNCTION_LENGTH_SH}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# function_of NAME LINES FIRST_BODY_LINE: a function whose braces span LINES lines, the first body
# line given, the others plain statements.
function_of() {
  local name=$1 lines=$2 first=$3
  echo "int $name(int x) {"
  echo "  $first"
  for ((i = 0; i < lines - 3; i++)); do
    echo "  x += $i;"
  done
  echo "}"
}

mkdir -p "$tmp/src/lib"
{
  echo '// A file whose braces in literals and comments must count for nothing.'
  echo '#include <string>'
  echo '#define OPEN {'
  echo 'namespace lib {'
  echo 'struct Options {'
  echo '  int size = 1;'
  echo '  int twice() const { return 2 * size; }'
  echo '};'
  # 60 lines: a scanner counting the "{" would never see it close and call it longer.
  function_of fits 60 'const char* open = "{"; char c = '"'"'{'"'"'; // {'
  # 61 lines: a scanner counting the "}" would close it early and let it pass.
  function_of too_long 61 'const char* close = "}\"}"; /* } */ auto raw = R"x(}")x";'
  echo 'const int kTable[] = {1, 2, 3};'
  echo 'int after(int x) { return x + 100'"'"'000; }'
  echo '}  // namespace lib'
} >"$tmp/src/lib/sample.cpp"
# A header whose member functions are inside a class and its constructor has an initialiser list.
{
  echo '#pragma once'
  echo 'class Counter {'
  echo ' public:'
  echo '  Counter() : count_{0}, step_(1) {'
  for ((i = 0; i < 59; i++)); do
    echo '    count_ += step_;'
  done
  echo '  }'
  echo ' private:'
  echo '  int count_;'
  echo '  int step_;'
  echo '};'
} >"$tmp/src/lib/counter.h"

out=$(bash "$check" "$tmp/src" 2>&1) && rc=0 || rc=$?
((rc == 1)) || fail "the tree with a 61-line function exited $rc, not 1: $out"
too_long_line=$(grep -n '^int too_long' "$tmp/src/lib/sample.cpp" | cut -d: -f1)
[[ $out == *"$tmp/src/lib/sample.cpp:$too_long_line: too_long is 61 lines (max 60)"* ]] ||
  fail "the 61-line function is not named by file:line, name and length: $out"
[[ $out != *"fits"* ]] || fail "the 60-line function was refused: $out"
[[ $out == *"Counter"*"61 lines"* ]] ||
  fail "the 61-line constructor with an initialiser list was not refused: $out"
(($(grep -c ' lines (max 60)' <<<"$out") == 2)) || fail "not exactly two functions refused: $out"

# A smaller MAX applies: `after` and `twice` are one line each and still pass with MAX 1.
out=$(bash "$check" "$tmp/src" 1 2>&1) || true
[[ $out == *"fits is 60 lines (max 1)"* ]] || fail "MAX 1 did not refuse fits: $out"
[[ $out != *"after "* && $out != *"twice "* ]] || fail "a one-line function was refused: $out"

# With the long functions cut to 60 lines the tree passes.
sed -i '/x += 57;/d' "$tmp/src/lib/sample.cpp"  # only too_long has it
sed -i '0,/count_ += step_;/{/count_ += step_;/d}' "$tmp/src/lib/counter.h"
if ! out=$(bash "$check" "$tmp/src" 2>&1); then
  fail "a tree whose longest function has 60 lines was refused: $out"
fi

out=$(bash "$check" "$tmp/missing" 2>&1) && rc=0 || rc=$?
((rc == 2)) && [[ $out == *"not a directory"* ]] || fail "a missing SRC_DIR: exit $rc, $out"

if ((failures > 0)); then
  echo "test_check_function_length: $failures failure(s)"
  exit 1
fi
echo "test_check_function_length: all cases passed"
