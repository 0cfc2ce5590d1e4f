#!/usr/bin/env bash
# Refresh the report's embedded plotly.js: Plotly's official "cartesian" partial bundle (scatter, bar,
# heatmap, ...; MIT), from the npm registry, at the same plotly.js version as the installed Python plotly
# package (the figures' JSON is written by that package, so the two must match; tests/report checks it).
# Why a partial bundle: the full plotly.min.js is 4.8 MB, and a one-run report must stay under 2 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(.venv/bin/python -c 'import re; from plotly.offline import get_plotlyjs; print(re.search(r"plotly\.js v([0-9.]+)", get_plotlyjs()[:400]).group(1))')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "plotly.js-cartesian-dist-min@$version" >/dev/null && tar xzf ./*.tgz)
gzip -9 -n -c "$work/package/plotly-cartesian.min.js" > src/shedlab/report/vendor/plotly-cartesian.min.js.gz
cp "$work/package/LICENSE" src/shedlab/report/vendor/plotly-LICENSE
echo "plotly.js-cartesian-dist-min@$version: $(sha256sum "$work/package/plotly-cartesian.min.js" | cut -d' ' -f1)"
