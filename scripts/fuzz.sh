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
# Installs what it needs on a fresh machine (the nightly toolchain). The targets are built
# and run as cargo-fuzz 0.13 builds and runs them (`cargo fuzz build -a`: the same rustc
# flags, below), without cargo-fuzz itself: installing it compiled ~120 crates on every fresh
# machine, and it added nothing here but those flags. No sanitizer by default (cargo-fuzz's
# `-s none`): the fuzzed code is safe Rust but for two `from_utf8_unchecked` of bytes checked to
# be ASCII, so AddressSanitizer found nothing it could, and it cost a third of the build's CPU
# (796 against 537 s) and slowed every input; LATLAB_FUZZ_SANITIZER=address builds and runs with
# it (and LeakSanitizer), as `cargo fuzz build -a` does. A crash (a panic, an overflow, a stack
# overflow), a leak under ASan, or a timeout fails the
# script; the input that caused it stays in fuzz/artifacts/TARGET/ and its path is printed. Targets run side by side, one per CPU (LATLAB_FUZZ_JOBS=N).
set -eu
cd "$(dirname "$0")/../fuzz"
secs=${1:-20}
sanitizer=${LATLAB_FUZZ_SANITIZER:-none}
case $sanitizer in none | address) ;; *) echo "fuzz.sh: LATLAB_FUZZ_SANITIZER must be none or address, not '$sanitizer'" >&2; exit 1 ;; esac
build_only=0
[ "$secs" = build ] && build_only=1 && secs=0
case $secs in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 1 ;; esac
[ $# -gt 0 ] && shift

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz: installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal
fi
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir="${CARGO_TARGET_DIR:-$PWD/target}/$triple/release"
# cargo-fuzz 0.13.2's flags for `build -a -s none` (`-s address`, its default, adds
# -Zsanitizer=address): libFuzzer's coverage (sancov: 8-bit counters, PC table, compares, stack
# depth), `cfg(fuzzing)`, no branch folding, debug assertions (and with them overflow checks),
# one codegen unit (its sancov passes keep ThinLTO from inlining across units). --target keeps
# them off build scripts and proc macros.
fuzz_rustflags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
fuzz_rustflags="$fuzz_rustflags -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
fuzz_rustflags="$fuzz_rustflags -Cllvm-args=-sanitizer-coverage-pc-table"
fuzz_rustflags="$fuzz_rustflags -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
fuzz_rustflags="$fuzz_rustflags -Cllvm-args=-simplifycfg-branch-fold-threshold=0"
fuzz_rustflags="$fuzz_rustflags -Cllvm-args=-sanitizer-coverage-stack-depth"
fuzz_rustflags="$fuzz_rustflags -Cdebug-assertions -Ccodegen-units=1"
[ "$sanitizer" = address ] && fuzz_rustflags="$fuzz_rustflags -Zsanitizer=address"
# Every [[bin]] of fuzz/Cargo.toml is a target.
all_targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^latlab-fuzz$')
targets=${*:-$all_targets}
for t in $targets; do
    case " $(echo $all_targets) " in
        *" $t "*) ;;
        *) echo "fuzz.sh: no fuzz target '$t' (fuzz/Cargo.toml has: $(echo $all_targets))" >&2; exit 1 ;;
    esac
done

start=$(date +%s)
RUSTFLAGS="$fuzz_rustflags" cargo +nightly build --release --bins --target "$triple" \
    --config 'profile.release.debug="line-tables-only"'
echo "fuzz: targets built in $(($(date +%s) - start)) s (sanitizer: $sanitizer)"
[ "$build_only" = 1 ] && exit 0

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
    # Leak checks need LeakSanitizer (LATLAB_FUZZ_SANITIZER=address). The trace target runs
    # the parallel parser (threads and std channels per input), whose per-thread channel
    # context in thread-local storage LeakSanitizer reports as a leak (112 bytes inside std,
    # not growing): leak checks are off for it, on for the others.
    leaks=0
    [ "$sanitizer" = address ] && leaks=1
    # run.json readers share a dictionary of the record's keys and extreme numbers.
    dict=""
    case $t in run_json | render | compare | store_rows) dict="-dict=dict/run_json.dict" ;; esac
    case $t in
        trace_*) cp ../crates/latlab-core/tests/fixtures/trace/* "$work/$t/" 2>/dev/null || true
                 leaks=0 ;;
        import_*) cp ../crates/latlab-core/tests/fixtures/import/* "$work/$t/" 2>/dev/null || true ;;
    esac
    rc=0
    mkdir -p "artifacts/$t"
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" \
        "$bin_dir/$t" -artifact_prefix="$PWD/artifacts/$t/" "$work/$t" -max_total_time="$secs" \
        -rss_limit_mb=2048 -timeout=10 -detect_leaks=$leaks -print_final_stats=1 $dict \
        >"$logs/$t" 2>&1 || rc=$?
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
            [ -e "$a" ] && echo "fuzz: $t: artifact $(readlink -f "$a") (reproduce: $bin_dir/$t $(readlink -f "$a"))" >&2
        done
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: crashes in:$failed" >&2
    exit 1
fi
echo "fuzz: all targets clean in $(($(date +%s) - start)) s ($jobs side by side)"
