#!/usr/bin/env bash
# Build latlab's Debian package: the release binary, its man pages (`latlab man`, one per
# command, gzipped) and completion scripts (`latlab completions`) staged in
# $CARGO_TARGET_DIR/release/deb-staging (target/ without CARGO_TARGET_DIR), then `cargo deb`
# with the assets of [package.metadata.deb] in crates/latlab/Cargo.toml. Prints the .deb's path
# on the last line.
#   bash scripts/deb.sh
# Needs cargo-deb (`cargo install cargo-deb --locked`; scripts/test installs it when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
# The Cargo profile of the binary (release; scripts/test checks the packaging with its `ci`
# build: LATLAB_DEB_PROFILE=ci).
profile=${LATLAB_DEB_PROFILE:-release}
if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "deb.sh: cargo-deb is missing: cargo install cargo-deb --locked" >&2
    exit 1
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
case $target in /*) ;; *) target=$PWD/$target ;; esac

cargo build --profile "$profile" --locked -p latlab
bin=$target/$profile/latlab
stage=$target/$profile/deb-staging
# The staging directory is latlab's own, rebuilt from scratch each time.
rm -rf -- "$stage"
mkdir -p -m 0700 -- "$stage/man" "$stage/completions"

"$bin" man | gzip -9n >"$stage/man/latlab.1.gz"
"$bin" man --list | while read -r cmd; do
    # shellcheck disable=SC2086 # a command path is words: `loads list`
    "$bin" man $cmd | gzip -9n >"$stage/man/latlab-${cmd// /-}.1.gz"
done
"$bin" completions bash >"$stage/completions/latlab.bash"
"$bin" completions zsh >"$stage/completions/_latlab"
"$bin" completions fish >"$stage/completions/latlab.fish"
chmod 0644 "$stage"/man/* "$stage"/completions/*
echo "deb.sh: $(ls "$stage/man" | wc -l) man pages, 3 completion scripts staged"

mkdir -p -- "$target/debian"
cargo deb -p latlab --profile "$profile" --no-build --locked --strip --no-dbgsym -o "$target/debian" | tail -n 1
