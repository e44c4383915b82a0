#!/bin/sh
# Run every fuzz target for N seconds each (default 20): the importers, the trace parser and
# attribution of `latlab analyze`, run.json loading, the results database's rows of a run.json
# (store_rows), every renderer, compare, histogram merge, the ledger file `latlab cleanup`
# reads, unit and CPU-list parsing.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#   scripts/fuzz.sh build        (installs what it needs and builds every target, runs none:
#                                 scripts/test starts this beside its other steps)
# Seeds: fuzz/corpus/TARGET/ (kept in the repository, never written to) plus, for the importers
# and the trace target, the test fixtures; the run.json readers use fuzz/dict/run_json.dict. libFuzzer grows a working copy under
# $CARGO_TARGET_DIR/fuzz-corpus/TARGET (fuzz/target/… without CARGO_TARGET_DIR), kept between
# runs. Targets are built with debug assertions and overflow checks (-a), so arithmetic that
# would wrap in a release build is a crash here.
# Installs what it needs on a fresh machine (the nightly toolchain, cargo-fuzz). A crash, a
# leak or a timeout fails the script; the input that caused it stays in fuzz/artifacts/TARGET/
# and its path is printed. Targets run side by side, one per CPU (LATLAB_FUZZ_JOBS=N).
set -eu
cd "$(dirname "$0")/../fuzz"
secs=${1:-20}
build_only=0
[ "$secs" = build ] && build_only=1 && secs=0
case $secs in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 1 ;; esac
[ $# -gt 0 ] && shift

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz: installing cargo-fuzz"
    # Unoptimized (--debug): it only runs cargo and libFuzzer, and builds in 74 s of CPU
    # here against 123 s optimized (scripts/test's machine is busy from start to end).
    cargo install --debug cargo-fuzz --locked
fi

start=$(date +%s)
cargo +nightly fuzz build -a
echo "fuzz: targets built in $(($(date +%s) - start)) s"
[ "$build_only" = 1 ] && exit 0

targets=${*:-$(cargo +nightly fuzz list)}
# Targets run side by side, one per CPU (LATLAB_FUZZ_JOBS=N sets how many): each libFuzzer
# process is single-threaded (scripts/test runs this at nice 19 beside its tests).
jobs=${LATLAB_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) echo "fuzz.sh: LATLAB_FUZZ_JOBS must be a whole number above 0, not '$jobs'" >&2; exit 1 ;; esac
work="${CARGO_TARGET_DIR:-$PWD/target}/fuzz-corpus"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# One target: its log in $logs/T, its exit status in $logs/T.rc.
fuzz_one() {
    t=$1
    mkdir -p "$work/$t"
    [ -d "corpus/$t" ] && cp corpus/"$t"/* "$work/$t/"
    # The trace target runs the parallel parser (threads and std channels per input), whose
    # per-thread channel context in thread-local storage LeakSanitizer reports as a leak (112
    # bytes inside std, not growing): leak checks are off for it, on for the others.
    leaks=1
    # run.json readers share a dictionary of the record's keys and extreme numbers.
    dict=""
    case $t in run_json | render | compare | store_rows) dict="-dict=dict/run_json.dict" ;; esac
    case $t in
        trace_*) cp ../crates/latlab-core/tests/fixtures/trace/* "$work/$t/" 2>/dev/null || true
                 leaks=0 ;;
        import_*) cp ../crates/latlab-core/tests/fixtures/import/* "$work/$t/" 2>/dev/null || true ;;
    esac
    rc=0
    cargo +nightly fuzz run -a "$t" "$work/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=10 -detect_leaks=$leaks -print_final_stats=1 $dict >"$logs/$t" 2>&1 || rc=$?
    echo "$rc" >"$logs/$t.rc"
}

running=0
for t in $targets; do
    fuzz_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait

failed=""
for t in $targets; do
    if [ "$(cat "$logs/$t.rc" 2>/dev/null)" = 0 ]; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t" | grep -o '[0-9]*$' || echo '?')
        echo "fuzz: $t: ${secs} s, $runs inputs, no crash"
    else
        failed="$failed $t"
        echo "fuzz: $t: FAILED; the end of its log:" >&2
        tail -n 40 "$logs/$t" >&2
        for a in artifacts/"$t"/*; do
            [ -e "$a" ] && echo "fuzz: $t: artifact $(readlink -f "$a") (reproduce: cd fuzz && cargo +nightly fuzz run -a $t $a)" >&2
        done
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed" >&2
    exit 1
fi
echo "fuzz: all targets clean in $(($(date +%s) - start)) s ($jobs side by side)"
