#!/bin/sh
# Run every importer's fuzz target for N seconds (default 30), seeded with the fixtures.
#   scripts/fuzz.sh [SECONDS]
set -eu
cd "$(dirname "$0")/../fuzz"
secs=${1:-30}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
for t in $(cargo +nightly fuzz list); do
    mkdir -p corpus/$t
    cp ../crates/latlab-core/tests/fixtures/import/* corpus/$t/ 2>/dev/null || true
    echo "fuzz: $t for ${secs}s"
    cargo +nightly fuzz run "$t" corpus/$t -- -max_total_time="$secs" -rss_limit_mb=2048
done
