#!/bin/sh
# Run latlab and report each figure as a LAVA test case (contrib/lava/latlab.yaml runs it).
# Proven under LAVA's own test-shell scripts in the kernel lab: crates/latlab/tests/lab_lava.rs.
#
#   latlab-lava.sh [-l LATLAB] [-D DURATION] [-i INTERVAL] [-p PRIORITY] [-c CPUS]
#                  [-w LOAD[,LOAD…]] [-t TRACE_THRESHOLD] [-m MAX_LATENCY] [-b BASELINE]
#                  [-f "RULE RULE…"] [-k real|sim] [-o OUTPUT_DIR]
#
# The run directory goes to OUTPUT_DIR/results/ and its result lines (`latlab report RUN
# --format lava`, with `latlab compare BASELINE RUN --fail-if RULE… --format lava` when a
# baseline is given) to OUTPUT_DIR/result.txt. Each line `NAME RESULT [VALUE UNITS]` becomes
# `lava-test-case NAME --result RESULT --measurement VALUE --units UNITS`; without
# lava-test-case (outside LAVA) the same is printed as the signal LAVA reads on a console,
# `<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=NAME RESULT=RESULT MEASUREMENT=VALUE UNITS=UNITS>`, as
# Linaro's send-to-lava.sh does. A line that is not of that shape (a name outside
# [A-Za-z0-9_.-], a value that is not a number) is never passed on: it is reported on stderr.
# Exit status: 0 when latlab ran (whatever the verdicts: LAVA records them), 1 when it could
# not (then the test case latlab-run fails).
set -u

LATLAB=latlab DURATION=60s INTERVAL=1ms PRIORITY=95 CPUS=all LOAD= TRACE_THRESHOLD=
MAX_LATENCY= BASELINE= FAIL_IF= BACKEND=real OUTPUT="$(pwd)/output"

usage() {
    echo "usage: $0 [-l LATLAB] [-D DURATION] [-i INTERVAL] [-p PRIORITY] [-c CPUS] [-w LOADS] [-t TRACE_THRESHOLD] [-m MAX_LATENCY] [-b BASELINE] [-f RULES] [-k real|sim] [-o OUTPUT_DIR]" >&2
    exit 1
}

while getopts "l:D:i:p:c:w:t:m:b:f:k:o:" opt; do
    case "$opt" in
        l) LATLAB=$OPTARG ;;
        D) DURATION=$OPTARG ;;
        i) INTERVAL=$OPTARG ;;
        p) PRIORITY=$OPTARG ;;
        c) CPUS=$OPTARG ;;
        w) LOAD=$OPTARG ;;
        t) TRACE_THRESHOLD=$OPTARG ;;
        m) MAX_LATENCY=$OPTARG ;;
        b) BASELINE=$OPTARG ;;
        f) FAIL_IF=$OPTARG ;;
        k) BACKEND=$OPTARG ;;
        o) OUTPUT=$OPTARG ;;
        *) usage ;;
    esac
done

if command -v lava-test-case >/dev/null 2>&1; then HELPER=yes; else HELPER=no; fi

# One test case: through lava-test-case, else as LAVA's console signal.
case_line() { # NAME RESULT [VALUE UNITS]
    if [ "$HELPER" = yes ]; then
        if [ $# -ge 4 ]; then
            lava-test-case "$1" --result "$2" --measurement "$3" --units "$4"
        else
            lava-test-case "$1" --result "$2"
        fi
    elif [ $# -ge 4 ]; then
        echo "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=$1 RESULT=$2 MEASUREMENT=$3 UNITS=$4>"
    else
        echo "<LAVA_SIGNAL_TESTCASE TEST_CASE_ID=$1 RESULT=$2>"
    fi
}

# Each line of FILE, checked before it is passed on.
send() {
    while IFS= read -r line; do
        # shellcheck disable=SC2086
        set -f; set -- $line; set +f
        ok=yes
        case "${1-}" in '' | *[!A-Za-z0-9_.-]*) ok=no ;; esac
        case "${2-}" in pass | fail | skip) ;; *) ok=no ;; esac
        if [ $# -eq 4 ]; then
            case "$3" in '' | *[!0-9.]*) ok=no ;; esac
            case "$4" in '' | *[!A-Za-z]*) ok=no ;; esac
        elif [ $# -ne 2 ]; then
            ok=no
        fi
        if [ "$ok" = yes ]; then
            case_line "$@"
        else
            echo "latlab-lava: not a result line, left out: $line" >&2
        fi
    done <"$1"
}

# A step that failed: its test case fails, and the script ends (exit 1).
fail_step() { # CASE MESSAGE
    echo "latlab-lava: $2" >&2
    case_line "$1" fail
    exit 1
}
fail_run() { fail_step latlab-run "$1"; }

if ! command -v "$LATLAB" >/dev/null 2>&1; then
    fail_run "no latlab: '$LATLAB' is not a program here (install latlab, or give its path with -l)"
fi
mkdir -p "$OUTPUT" || fail_run "cannot create $OUTPUT"
RESULTS="$OUTPUT/results"
RESULT_FILE="$OUTPUT/result.txt"
: >"$RESULT_FILE" || fail_run "cannot write $RESULT_FILE"

set -- run --duration "$DURATION" --interval "$INTERVAL" --priority "$PRIORITY" \
    --cpus "$CPUS" --backend "$BACKEND" --results "$RESULTS" --no-db --quiet --label lava
if [ -n "$LOAD" ]; then
    old_ifs=$IFS IFS=,
    for l in $LOAD; do set -- "$@" --load "$l"; done
    IFS=$old_ifs
fi
[ -n "$TRACE_THRESHOLD" ] && set -- "$@" --trace-threshold "$TRACE_THRESHOLD"
[ -n "$MAX_LATENCY" ] && set -- "$@" --max-latency "$MAX_LATENCY"

"$LATLAB" "$@" >"$OUTPUT/summary.txt"
code=$?
# 0: within the limits; 2: a sample exceeded --max-latency (the gate's test case says so).
if [ $code -ne 0 ] && [ $code -ne 2 ]; then
    fail_run "latlab run failed (exit $code)"
fi
case_line latlab-run pass
RUN=$(ls -d "$RESULTS"/*-lava 2>/dev/null | tail -n 1)
[ -n "$RUN" ] || fail_step latlab-report "latlab wrote no run directory under $RESULTS"
"$LATLAB" report "$RUN" --format lava -o "$RESULT_FILE" || fail_step latlab-report "latlab report failed"
if [ -n "$BASELINE" ]; then
    set -f
    set -- compare "$BASELINE" "$RUN" --format lava -o "$OUTPUT/checks.txt"
    for r in $FAIL_IF; do set -- "$@" --fail-if "$r"; done
    set +f
    "$LATLAB" "$@"
    code=$?
    if [ $code -ne 0 ] && [ $code -ne 2 ]; then
        fail_step latlab-compare "latlab compare with the baseline failed (exit $code)"
    fi
    cat "$OUTPUT/checks.txt" >>"$RESULT_FILE"
fi
send "$RESULT_FILE"
exit 0
