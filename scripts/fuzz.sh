#!/bin/sh
# Run every fuzz target (the importers, and the trace parser and attribution of `latlab
# analyze`) for N seconds (default 20), seeded with the import or trace fixtures.
#   scripts/fuzz.sh [SECONDS]
# Installs what it needs on a fresh machine (the nightly toolchain, cargo-fuzz). A crash, a
# leak or a timeout fails the script; the input that caused it stays in fuzz/artifacts/TARGET/
# and its path is printed.
set -eu
cd "$(dirname "$0")/../fuzz"
secs=${1:-20}
case $secs in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 1 ;; esac

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

start=$(date +%s)
cargo +nightly fuzz build
echo "fuzz: targets built in $(($(date +%s) - start)) s"

failed=""
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for t in $(cargo +nightly fuzz list); do
    mkdir -p "corpus/$t"
    # The trace target runs the parallel parser (threads and std channels per input), whose
    # per-thread channel context in thread-local storage LeakSanitizer reports as a leak (112
    # bytes inside std, not growing): leak checks are off for it, on for the importers.
    leaks=1
    case $t in
        trace_*) cp ../crates/latlab-core/tests/fixtures/trace/* "corpus/$t/" 2>/dev/null || true
                 leaks=0 ;;
        *) cp ../crates/latlab-core/tests/fixtures/import/* "corpus/$t/" 2>/dev/null || true ;;
    esac
    if cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -detect_leaks=$leaks -print_final_stats=1 >"$logs/$t" 2>&1; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t" | grep -o '[0-9]*$' || echo '?')
        echo "fuzz: $t: ${secs} s, $runs inputs, no crash"
    else
        failed="$failed $t"
        echo "fuzz: $t: FAILED; the end of its log:" >&2
        tail -n 40 "$logs/$t" >&2
        for a in artifacts/"$t"/*; do
            [ -e "$a" ] && echo "fuzz: $t: artifact $(readlink -f "$a") (reproduce: cd fuzz && cargo +nightly fuzz run $t $a)" >&2
        done
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed" >&2
    exit 1
fi
echo "fuzz: all targets clean in $(($(date +%s) - start)) s"
