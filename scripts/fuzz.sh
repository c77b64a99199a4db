#!/usr/bin/env bash
# Runs every cairn-storage fuzz target for N seconds each (default 60).
#
#   scripts/fuzz.sh [seconds]
#
# Works on stable Rust: `cargo fuzz run --sanitizer=none` needs no nightly feature (the targets
# are safe Rust, so AddressSanitizer would add little). Installs cargo-fuzz if it is missing.
# Crash inputs land in fuzz/artifacts/<target>/ and are replayed by the regular test suite
# (storage/tests/fuzz_regressions.rs); new corpus entries go to a scratch directory, so the
# checked-in corpus (fuzz/corpus/<target>/) stays small: run `cargo fuzz cmin` by hand to curate.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
targets=(record_decode store_ops serve_params)

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# The seed corpus is generated from real records (see fuzz/src/bin/seed_corpus.rs).
if [ ! -d fuzz/corpus/record_decode ] || [ -z "$(ls -A fuzz/corpus/record_decode)" ]; then
    (cd fuzz && cargo run --quiet --bin seed_corpus)
fi

status=0
for target in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    scratch="$(mktemp -d)"
    echo "== fuzz $target for ${seconds}s"
    # New inputs go to $scratch (first corpus dir); the checked-in corpus is only read.
    if ! (cd fuzz && cargo fuzz run --sanitizer=none "$target" "$scratch" "corpus/$target" -- \
        -max_total_time="$seconds" -max_len=10000 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 2>&1 | tee "$scratch.log" | grep -E '^(#[0-9]+ +DONE|stat::|==|SUMMARY|Done)' ); then
        status=1
    fi
    if grep -qE 'panicked|ERROR: libFuzzer|SUMMARY' "$scratch.log"; then
        grep -E -A3 'panicked' "$scratch.log" | head -20 || true
        echo "!! $target found a crash; input saved under fuzz/artifacts/$target/"
        status=1
    fi
    rm -rf "$scratch" "$scratch.log"
done
exit "$status"
