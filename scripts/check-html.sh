#!/bin/sh
# Open latlab HTML reports in a real headless browser (Debian's chromium) and fail on console
# errors, a missing or empty SVG plot, or a page that does not render. Takes a screenshot of
# each (REPORT.png next to it) for a human to look at.
#   scripts/check-html.sh report.html [compare.html …]
set -eu
BROWSER=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$BROWSER" ]; then
    echo "check-html: chromium not installed (apt-get install -y chromium)" >&2
    [ "${LATLAB_REQUIRE_PRIVILEGED:-0}" = 1 ] && exit 1
    exit 0
fi
status=0
for f in "$@"; do
    profile=$(mktemp -d)
    abs=$(readlink -f "$f")
    # Offline, no sandbox (root in CI), a fresh profile; `timeout` so a wedged browser fails
    # the check instead of hanging CI.
    flags="--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking --disable-component-update --disable-sync --user-data-dir=$profile"
    # The DOM after rendering: the SVGs must be there, each with drawn content.
    dom=$(timeout 120 $BROWSER $flags --enable-logging=stderr --v=0 --dump-dom "file://$abs" 2>"$profile/log" || true)
    n_svg=$(printf '%s' "$dom" | grep -o '<svg' | wc -l)
    n_drawn=$(printf '%s' "$dom" | grep -o '<polyline[^>]*points="[0-9]' | wc -l)
    if [ "$n_svg" -eq 0 ] || [ "$n_drawn" -eq 0 ]; then
        echo "check-html: $f: $n_svg SVGs, $n_drawn drawn series (expected at least one of each)" >&2
        status=1
    fi
    if grep -E 'CONSOLE|Uncaught|ERROR:.*(console|javascript)' "$profile/log" >/dev/null; then
        echo "check-html: $f: console errors:" >&2
        grep -E 'CONSOLE|Uncaught' "$profile/log" >&2 || true
        status=1
    fi
    timeout 120 $BROWSER $flags --hide-scrollbars --window-size=1200,2400 --screenshot="${abs%.html}.png" "file://$abs" 2>/dev/null || status=1
    if [ ! -s "${abs%.html}.png" ]; then
        echo "check-html: $f: no screenshot" >&2
        status=1
    fi
    echo "check-html: $f: $n_svg SVGs, $n_drawn series, screenshot ${abs%.html}.png"
    rm -rf "$profile"
done
exit $status
