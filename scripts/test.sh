#!/usr/bin/env bash
# Runs every test of the workspace (debug build). Used by README.md and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast
fi
