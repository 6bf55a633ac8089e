#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default 30): the Debezium
# message decoder and the pgoutput decoder (see fuzz/README.md). Prints, per target,
# how long it ran and how many inputs it executed; exits non-zero when a target found
# a crash, naming the artifact (fuzz/artifacts/<target>/...) that reproduces it.
#
#   scripts/fuzz.sh [SECONDS]
#
# cargo-fuzz needs nightly compiler flags (-Z sanitizer, -Z ...); the machine's one
# stable toolchain accepts them with RUSTC_BOOTSTRAP=1. cargo-fuzz itself is installed
# from crates.io when missing.
#
# Sanitizer: none by default (FUZZ_SANITIZER=address for AddressSanitizer). The
# targets and the decoding code they reach are safe Rust (no `unsafe` in retina-cdc's
# or retina-postgres's decoders), so ASan finds little that the bounds checks,
# overflow checks and debug assertions of cargo fuzz's build do not already turn into
# panics, and here it is expensive. Measured on the 2-core machine while other builds
# ran (load about 4): a cold build took 18m47s with ASan and 14m48s without; from the
# seeds, 60 s each, ASan ran debezium_message at 729 executions/s against 3620 and
# pgoutput_message at 2457/s against 14551 (5-6 times slower).
#
# CI cost of `scripts/fuzz.sh 30` on a cold target dir, same conditions: 888 s build
# plus 2 x 32 s runs, 952 s in all (and about 2 min once to install cargo-fuzz on a
# fresh machine). The build goes to $CARGO_TARGET_DIR when set
# (.ci/run sets one that persists between runs: then only Retina's crates rebuild),
# else fuzz/target.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
case "$seconds" in
    ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;;
esac
sanitizer="${FUZZ_SANITIZER:-none}"
targets=(debezium_message pgoutput_message)
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

start=$(date +%s)
# nice: on a shared 2-core machine the fuzz build must not starve other builds.
nice -n 10 cargo fuzz build --sanitizer "$sanitizer"
echo "fuzz: build took $(( $(date +%s) - start )) s (sanitizer $sanitizer)"

failed=0
passed=0
for target in "${targets[@]}"; do
    # New inputs go to a scratch corpus under fuzz/target; the committed seeds in
    # fuzz/corpus/<target> are only read.
    work="fuzz/target/corpus/$target"
    mkdir -p "$work" "fuzz/artifacts/$target"
    log="fuzz/target/fuzz-$target.log"
    options=(-max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10)
    if [ "$target" = debezium_message ]; then
        options+=(-dict=fuzz/debezium.dict)
    fi
    began=$(date +%s)
    status=0
    nice -n 10 cargo fuzz run --sanitizer "$sanitizer" "$target" "$work" "fuzz/corpus/$target" -- "${options[@]}" >"$log" 2>&1 || status=$?
    took=$(( $(date +%s) - began ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ "$status" -eq 0 ]; then
        echo "fuzz: $target ran ${took} s, ${runs:-?} executions (${rate:-?}/s), no crash"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "fuzz: $target FAILED after ${took} s, ${runs:-?} executions (exit $status); log $log:" >&2
        tail -n 60 "$log" >&2
        artifacts=$(grep -oE "fuzz/artifacts/$target/[A-Za-z0-9_.-]+" "$log" | sort -u || true)
        for artifact in $artifacts; do
            echo "fuzz: crash artifact $artifact (reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer $sanitizer $target $artifact)" >&2
        done
    fi
done
# The plain summary line CI reads: one "test" per target.
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
