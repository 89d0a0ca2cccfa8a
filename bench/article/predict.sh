#!/bin/sh
# Regenerates everything of bench/article (profiles/, results.md, charts/) from the published
# figures in predict.py and the two measured profiles in measured/, in seconds.
#   CHEXSCALE=build/src/cli/chexscale bench/article/predict.sh
set -e
here=$(dirname "$0")
exec python3 "$here/predict.py" --chexscale "${CHEXSCALE:-build/src/cli/chexscale}" "$@"
