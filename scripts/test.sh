#!/usr/bin/env bash
# Runs every test of the workspace (debug build). Used by README.md and .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Services the tests start for real, installed from Debian packages when missing:
# retina-cdc's NATS tests run a JetStream server.
missing=()
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
# retina-server's and the CLI's SQL tests run the real psql.
command -v psql >/dev/null 2>&1 || missing+=(postgresql-client)
# retina-postgres's tests start throwaway PostgreSQL clusters (initdb + pg_ctl).
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    missing+=(postgresql)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} for the tests" >&2
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast
fi

# Fuzz smoke test: each cargo-fuzz target (fuzz/) for 30 s; fails on a crash and
# names its artifact. Its instrumented build is apart from the workspace's (see fuzz/README.md).
scripts/fuzz.sh 30
