#!/usr/bin/env bash
# Checks the layering of a source tree (docs/architecture.md), reading the #include lines:
# - a file in src/<layer>/ may include headers of its own layer and of the layers below it only:
#     common <- models, data, distributed, report <- train <- measure, launch <- cli
#     common, distributed, report <- simulate <- measure, cli
# - inside a layer with rooms (src/data/<room>/), a room may include its own headers and those of
#   the rooms below it only, never the files at the top of its layer, which may include any room;
# - no two files include each other (a.h or a.cpp includes b.h while b.h or b.cpp includes a.h).
# The linker cannot catch an upward include of a header-only part (every module has src/ on its
# include path), hence this check. Prints file:line and the forbidden edge of each violation;
# exit status 1 if there is any.
# Usage: check_layers.sh SRC_DIR
set -euo pipefail

src=${1:?usage: check_layers.sh SRC_DIR}

# The layers each layer may include, besides itself.
declare -A allowed=(
  [common]=""
  [models]="common"
  [data]="common"
  [distributed]="common"
  [report]="common"
  [simulate]="common distributed report"
  [train]="common models data distributed report"
  [measure]="common models data distributed report train simulate"
  [launch]="common models data distributed report train"
  [cli]="common models data distributed report train measure launch simulate"
)

# The rooms of the layers that have them, and the rooms of the same layer each may include.
declare -A rooms=(
  [data/image]=""
  [data/labels]=""
  [data/datasets]="labels"
  [data/shards]="labels datasets image"
  [data/synthetic]="labels datasets image"
)

violations=0
report() {
  echo "$*"
  violations=$((violations + 1))
}

# The room of a path under a layer ("data/image/png_io.h" -> "data/image"), or the layer itself
# for a file at its top ("data/loader.h" -> "data").
room_of() {
  local path=$1 layer=${1%%/*} rest=${1#*/}
  if [[ $rest == */* ]]; then echo "$layer/${rest%%/*}"; else echo "$layer"; fi
}

# includes.txt: "including-stem included-stem file line" for every include of a src header.
includes=$(mktemp)
trap 'rm -f "$includes"' EXIT

for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [[ -z ${allowed[$layer]+known} ]]; then
    report "${dir%/}: not a known layer; add it to the table in $0 and to docs/architecture.md"
    continue
  fi
  for sub in "$dir"*/; do
    [[ -d $sub ]] || continue
    room="$layer/$(basename "$sub")"
    [[ -n ${rooms[$room]+known} ]] ||
      report "${sub%/}: not a known room of $layer; add it to the table in $0 and to" \
        "docs/architecture.md"
  done
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    text=${rest#*:}
    [[ $text =~ include[[:space:]]*[\<\"]([A-Za-z_]+)/([^\>\"]*) ]] || continue
    target=${BASH_REMATCH[1]}
    header="$target/${BASH_REMATCH[2]}"
    [[ -n ${allowed[$target]+known} ]] || continue
    relative=${file#"$src"/}
    echo "${relative%.*} ${header%.*} $file $line" >>"$includes"
    if [[ $target != "$layer" ]]; then
      if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
        report "$file:$line: $layer -> $target is not allowed: includes $header" \
          "($layer may include: ${allowed[$layer]:-no other layer})"
      fi
      continue
    fi
    from=$(room_of "$relative")
    to=$(room_of "$header")
    [[ $from != "$layer" && $from != "$to" ]] || continue
    if [[ $to == "$layer" ]]; then
      report "$file:$line: $from -> the top of $layer is not allowed: includes $header" \
        "(a room includes only rooms below it)"
    elif [[ " ${rooms[$from]:-} " != *" ${to#*/} "* ]]; then
      report "$file:$line: $from -> $to is not allowed: includes $header" \
        "(${from#*/} may include: ${rooms[$from]:-no other room})"
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][A-Za-z_]+/' "$dir" | sort)
done

# Files that include each other: an edge a -> b whose reverse b -> a exists too (a != b).
declare -A edge=()
while read -r from to file line; do
  [[ $from != "$to" ]] && edge["$from $to"]="$file:$line"
done <"$includes"
for key in "${!edge[@]}"; do
  read -r from to <<<"$key"
  [[ -n ${edge["$to $from"]+known} && $from < $to ]] || continue
  report "${edge[$key]}: $from and $to include each other (also ${edge["$to $from"]});" \
    "move what both need into a file of its own"
done

if ((violations > 0)); then
  echo "check_layers: $violations forbidden include(s) in $src"
  exit 1
fi
echo "check_layers: every include in $src follows the layer and room direction"
