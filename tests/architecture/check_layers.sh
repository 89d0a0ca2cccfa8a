#!/usr/bin/env bash
# Checks the layering of a source tree: a file in src/<layer>/ may include headers of its own layer
# and of the layers below it only (docs/architecture.md):
#   common <- models, data, distributed, report <- train <- bench, launch <- cli
#   common, distributed, report <- simulate <- bench, cli
# The linker cannot catch an upward include of a header-only part (every module has src/ on its
# include path), so this reads the #include lines. Prints file:line and the forbidden edge of each
# violation; exit status 1 if there is any.
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
  [bench]="common models data distributed report train simulate"
  [launch]="common models data distributed report train"
  [cli]="common models data distributed report train bench launch simulate"
)

violations=0
for dir in "$src"/*/; do
  layer=$(basename "$dir")
  if [[ -z ${allowed[$layer]+known} ]]; then
    echo "${dir%/}: not a known layer; add it to the table in $0 and to docs/architecture.md"
    violations=$((violations + 1))
    continue
  fi
  while IFS= read -r hit; do
    file=${hit%%:*}
    rest=${hit#*:}
    line=${rest%%:*}
    text=${rest#*:}
    [[ $text =~ include[[:space:]]*[\<\"]([A-Za-z_]+)/([^\>\"]*) ]] || continue
    target=${BASH_REMATCH[1]}
    header="$target/${BASH_REMATCH[2]}"
    [[ -n ${allowed[$target]+known} && $target != "$layer" ]] || continue
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "$file:$line: $layer -> $target is not allowed: includes $header" \
        "($layer may include: ${allowed[$layer]:-no other layer})"
      violations=$((violations + 1))
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][A-Za-z_]+/' "$dir" | sort)
done

if ((violations > 0)); then
  echo "check_layers: $violations forbidden include(s) in $src"
  exit 1
fi
echo "check_layers: every include in $src follows the layer direction"
