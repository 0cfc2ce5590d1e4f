#!/usr/bin/env bash
# The README's picture of a report: the top of REPORT as headless Chromium draws it, 1120 × 2536 pixels.
#   bash scripts/report-screenshot.sh out/demo/report.html docs/report-screenshot.png
# Same flags as the browser test (tests/report/test_report_browser.py): no network, a throwaway
# profile, virtual time for the plots to draw. Needs Debian's chromium (scripts/ensure-chromium.sh).
set -euo pipefail
if [ "$#" -ne 2 ]; then
    echo "usage: bash scripts/report-screenshot.sh REPORT.html OUT.png" >&2
    exit 2
fi
report=$1
out=$2
if [ ! -f "$report" ]; then
    echo "error: $report: no such report (run bash scripts/demo.sh first)" >&2
    exit 2
fi
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    echo "error: chromium is not installed (bash scripts/ensure-chromium.sh, as root)" >&2
    exit 2
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
url="file://$(realpath "$report")"
"$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --hide-scrollbars "--host-resolver-rules=MAP * ~NOTFOUND" "--user-data-dir=$profile" \
    --virtual-time-budget=20000 --window-size=1120,2536 "--screenshot=$(realpath -m "$out")" "$url" \
    >/dev/null 2>&1
test -s "$out"
echo "$out"
