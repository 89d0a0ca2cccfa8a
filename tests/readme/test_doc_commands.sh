#!/usr/bin/env bash
# The commands printed in the code blocks of README.md and docs/*.md are ones the project's
# scripts accept, so that a renamed option or variant cannot leave a documented command that
# fails, or fails only after minutes of bringing a lab up:
#   - every option given to a script of lab/, bench/, scripts/ or deploy/ is one of the options
#     that script's argument loop takes (up to a `--` that hands the rest to another program);
#   - every lab/compare.sh command runs as printed with --check added: its options, layouts,
#     engine and peer variants, rounds and pods mode checked, no lab made, nothing measured.
# Usage: test_doc_commands.sh SOURCE_DIR
set -euo pipefail

src=${1:?usage: test_doc_commands.sh SOURCE_DIR}
failures=0 scripts_checked=0 compares_checked=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The command lines of FILE's code blocks (```-fenced, or indented 4 spaces after a blank line),
# a backslash-continued command joined into one line.
code_lines() {
  awk '
    /^ *```/ { fenced = !fenced; next }
    {
      code = fenced || ($0 ~ /^    / && (indented || blank))
      indented = code && !fenced
      blank = ($0 ~ /^ *$/)
      if (!code) { if (held != "") print held; held = ""; next }
      line = $0; sub(/^ +/, "", line)
      if (line ~ /\\$/) { held = held substr(line, 1, length(line) - 1) " "; next }
      print held line; held = ""
    }
    END { if (held != "") print held }' "$1"
}

# The long options of SCRIPT's argument loop: its case arms (`--steps) ...`, `-h | --help) ...`);
# none for a script of positional arguments.
script_options() {
  { grep -E '^[[:space:]]+(-[-a-z0-9]+[[:space:]]*\|[[:space:]]*)*-[-a-z0-9]+\)' "$1" || true; } |
    grep -oE -- '--[a-z0-9][-a-z0-9]*' | sort -u || true
}

# Each option given to a project script in LINE (of DOC) is one that script takes.
check_script_options() {
  local doc=$1 line=$2 word script="" options=""
  local -a words
  read -r -a words <<<"$line"
  for word in "${words[@]}"; do
    if [[ "$word" =~ ^(\./)?((lab|bench|scripts|deploy)/[A-Za-z0-9_/.-]+\.sh)$ ]]; then
      script=${BASH_REMATCH[2]}
      scripts_checked=$((scripts_checked + 1))
      if [ ! -f "$src/$script" ]; then
        fail "$doc: $script does not exist"
        script=""
        continue
      fi
      options=$(script_options "$src/$script")
      continue
    fi
    [ -n "$script" ] || continue
    case "$word" in
      '|' | '&&' | ';' | '#'* | '>'* | '--') script="" ;;
      --[a-z0-9]*)
        [[ "$word" =~ ^--[a-z0-9][-a-z0-9]* ]]  # the name, without =VALUE or trailing prose
        grep -qx -- "${BASH_REMATCH[0]}" <<<"$options" ||
          fail "$doc: $script has no option ${BASH_REMATCH[0]}: $line"
        ;;
    esac
  done
}

# The LINE's lab/compare.sh command (of DOC) passes compare.sh --check.
check_compare() {
  local doc=$1 line=$2 rest out
  local -a args
  rest=${line#*lab/compare.sh}
  rest=${rest%%#*} rest=${rest%%|*} rest=${rest%%&&*} rest=${rest%%;*}
  read -r -a args <<<"$rest"
  compares_checked=$((compares_checked + 1))
  out=$(bash "$src/lab/compare.sh" "${args[@]}" --check 2>&1) ||
    fail "$doc: lab/compare.sh$rest"$'\n'"      $out"
}

for path in "$src/README.md" "$src"/docs/*.md; do
  doc=${path#"$src"/}
  while IFS= read -r line; do
    check_script_options "$doc" "$line"
    [[ "$line" != *"lab/compare.sh "* ]] || check_compare "$doc" "$line"
  done < <(code_lines "$path")
done

# The docs print dozens of script commands, eight of them compare.sh's; finding few would mean
# the extraction broke.
echo "$scripts_checked script command(s) checked, $compares_checked of them lab/compare.sh's;" \
  "$failures failure(s)"
[ "$scripts_checked" -ge 20 ] || fail "only $scripts_checked script command(s) found in the docs"
[ "$compares_checked" -ge 5 ] || fail "only $compares_checked lab/compare.sh command(s) found"
[ "$failures" -eq 0 ]
