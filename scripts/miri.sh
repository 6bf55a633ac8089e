#!/usr/bin/env bash
# The lock-free visibility code (tile snapshots, delete-ts blocks, sealing) and the
# index prefetch (a raw-pointer hint) under Miri.
# Opt-in, not part of CI: it needs the nightly toolchain with the miri and rust-src
# components (`rustup component add --toolchain nightly miri rust-src`) and takes ~5
# minutes. Tree borrows and permissive provenance because crossbeam-epoch itself is
# not clean under stacked borrows; leaks ignored because the global epoch collector
# never runs the destructors still deferred when the process exits.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/retina-miri}"
export MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-permissive-provenance -Zmiri-disable-isolation -Zmiri-ignore-leaks"
cargo +nightly miri test -p retina-core --lib visibility::
cargo +nightly miri test -p retina-core --lib -- prefetch:: index::single_point::tests::prefetching_changes_no_answer replay::hot_path::shard::tests
