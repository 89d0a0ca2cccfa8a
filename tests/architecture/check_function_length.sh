#!/usr/bin/env bash
# Checks that no function in a source tree is longer than MAX lines (the house rule: 60), with a
# brace-matching scan of every .cpp and .h: comments, string, raw string and character literals
# are skipped, so braces inside them count for nothing. A function's length runs from the line of
# its body's opening brace to that of its closing brace; lambdas and local classes count towards
# the function they are in. Prints file:line, the name and the length of each function over MAX;
# exit status 1 if there is any.
# Usage: check_function_length.sh SRC_DIR [MAX]
set -euo pipefail

src=${1:?usage: check_function_length.sh SRC_DIR [MAX]}
max=${2:-60}
[[ -d $src ]] || {
  echo "check_function_length: $src is not a directory"
  exit 2
}
[[ $max =~ ^[1-9][0-9]*$ ]] || {
  echo "check_function_length: MAX must be a positive integer, not '$max'"
  exit 2
}

mapfile -d '' files < <(find "$src" -type f \( -name '*.cpp' -o -name '*.h' \) -print0 | sort -z)
((${#files[@]} > 0)) || {
  echo "check_function_length: no .cpp or .h file under $src"
  exit 2
}

# The scan keeps a stack of the blocks it is in: ns (namespace, extern "C"), cls (class, struct,
# union, enum), fn (a function body), blk (any block inside a function), init (a braced member
# initialiser in a constructor's initialiser list) and data (a braced initialiser outside any
# function). The text since the last ';', '{' or '}' outside functions (the "head") says what a
# '{' opens.
awk -v max="$max" -v quote="'" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }

# The head with trailing qualifiers (const, noexcept, override, ...) removed.
function strip_qualifiers(h,    old) {
  do {
    old = h
    sub(/[ \t]*(const|noexcept|override|final|mutable|volatile|&&|&)$/, "", h)
  } while (h != old)
  return h
}

# A constructor initialiser list: ") :" not followed by another ":".
function has_init_list(h) { return h ~ /\)[ \t]*:([^:]|$)/ }

function is_function(h,    q) {
  q = strip_qualifiers(h)
  if (q ~ /\)$/) return 1
  if (q ~ /\)[^()]*->[^()]*$/) return 1  # trailing return type
  return has_init_list(h) && q ~ /\}$/     # ... : member_{value} {
}

# The name a head declares: the identifier before its first "(" ("ns::Class::method",
# "operator()"), or for a lambda the variable it initialises.
function function_name(h,    p, before) {
  p = index(h, "(")
  before = trim(substr(h, 1, p - 1))
  if (before ~ /operator$/) return substr(before, match(before, /[A-Za-z0-9_:~]*operator$/)) "()"
  if (before ~ /\]$/) {
    sub(/[ \t]*=[^=]*$/, "", before)
    if (match(before, /[A-Za-z_][A-Za-z0-9_:]*$/)) return substr(before, RSTART) " (lambda)"
    return "lambda"
  }
  if (match(before, /[A-Za-z_~][A-Za-z0-9_:~<>,]*$/)) return substr(before, RSTART)
  return before
}

function is_word(h, word) {
  return h ~ ("(^|[^A-Za-z0-9_])" word "([^A-Za-z0-9_]|$)")
}

function open_brace(    top, h, kind) {
  top = depth > 0 ? kinds[depth] : "ns"
  h = trim(head)
  if (top == "fn" || top == "blk") {
    kind = "blk"
  } else if (top == "data") {
    kind = "data"
  } else if (is_word(h, "namespace") || h == "extern" || h == "") {
    kind = "ns"
  } else if (is_function(h)) {
    kind = "fn"
  } else if ((is_word(h, "class") || is_word(h, "struct") || is_word(h, "union") ||
              is_word(h, "enum")) && h !~ /=/) {
    kind = "cls"
  } else if (top == "cls" && has_init_list(h)) {
    kind = "init"
  } else if (has_init_list(h) && h !~ /=/) {
    kind = "init"
  } else {
    kind = "data"
  }
  depth++
  kinds[depth] = kind
  if (kind == "fn") {
    names[depth] = function_name(h)
    starts[depth] = FNR
  }
  if (kind != "init" && kind != "blk" && kind != "data") head = ""
}

function close_brace(    kind, length_lines) {
  if (depth == 0) return
  kind = kinds[depth]
  if (kind == "fn") {
    length_lines = FNR - starts[depth] + 1
    if (length_lines > max) {
      printf "%s:%d: %s is %d lines (max %d)\n", FILENAME, starts[depth], names[depth],
             length_lines, max
      over++
    }
  }
  depth--
  if (kind == "init") head = head "{}"
  else if (kind == "fn" || kind == "ns" || kind == "cls") head = ""
}

function in_function() { return depth > 0 && (kinds[depth] == "fn" || kinds[depth] == "blk") }

FNR == 1 { depth = 0; head = ""; comment = 0; raw = ""; continued = 0 }

{
  line = $0
  i = 1
  n = length(line)
  # A preprocessor line, or the continuation of one: no code for the scan.
  if (!comment && raw == "" && (continued || line ~ /^[ \t]*#/)) {
    continued = line ~ /\\$/
    next
  }
  while (i <= n) {
    if (comment) {
      p = index(substr(line, i), "*/")
      if (p == 0) { i = n + 1; break }
      i += p + 1
      comment = 0
      continue
    }
    if (raw != "") {
      p = index(substr(line, i), raw)
      if (p == 0) { i = n + 1; break }
      i += p + length(raw) - 1
      raw = ""
      continue
    }
    c = substr(line, i, 1)
    two = substr(line, i, 2)
    if (two == "//") break
    if (two == "/*") { comment = 1; i += 2; continue }
    if (c == "\"") {
      if (i > 1 && substr(line, i - 1, 1) == "R" && (i == 2 || substr(line, i - 2, 1) !~ /[A-Za-z0-9_]/ ||
          substr(line, i - 3, 3) ~ /^(u8R|[^A-Za-z0-9_][LuU]R)$/)) {
        p = index(substr(line, i + 1), "(")
        raw = ")" substr(line, i + 1, p - 1) "\""
        i += p + 1
        continue
      }
      # An ordinary string: to the next quote that no backslash escapes.
      for (i++; i <= n; i++) {
        c = substr(line, i, 1)
        if (c == "\\") { i++; continue }
        if (c == "\"") break
      }
      i++
      if (!in_function()) head = head "\"\""
      continue
    }
    if (c == quote) {
      # A digit separator (as in 100 000 written with quotes) rather than a character literal.
      before = substr(line, 1, i - 1)
      if (match(before, /[0-9A-Za-z_.]+$/) && substr(before, RSTART, 1) ~ /[0-9]/) { i++; continue }
      for (i++; i <= n; i++) {
        c = substr(line, i, 1)
        if (c == "\\") { i++; continue }
        if (c == quote) break
      }
      i++
      continue
    }
    if (c == "{") open_brace()
    else if (c == "}") close_brace()
    else if (c == ";" && !in_function()) { if (depth == 0 || kinds[depth] != "data") head = "" }
    else if (!in_function()) head = head c
    i++
  }
  if (!in_function()) head = head " "
}

END {
  if (over > 0) {
    printf "check_function_length: %d function(s) over %d lines\n", over, max
    exit 1
  }
}
' "${files[@]}" || exit 1
echo "check_function_length: no function in $src is over $max lines"
