#!/usr/bin/env bash
# Runs every test of the workspace (debug build). Used by README.md and .ci/run.
#
#   scripts/test.sh          everything, services installed and started (CI)
#   scripts/test.sh --fast   the unit tests of every crate and the module-cycle check:
#                            no service, no root, no install, no fuzz build; for the
#                            edit-compile-test loop
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fast" ]; then
    python3 scripts/module_cycles.py
    exec cargo test --workspace --lib --bins
fi

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
# retina-server's client tests run pgjdbc (a single-file Java program: needs a JDK)
# and SQLAlchemy + psycopg (from PyPI, in a venv below).
[ -f /usr/share/java/postgresql.jar ] || missing+=(libpostgresql-jdbc-java)
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3 python3-venv)
# The Kafka TLS test makes its certificates with the openssl command.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} for the tests" >&2
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi
# Apache Kafka 4.4 (KRaft), Kafka Connect 4.3 with Debezium 3.6.1, and Spark 4.0.1 with
# Delta Lake 4.0 and Iceberg 1.10 run from jars Maven resolves once into a cache outside
# the clone (${RETINA_JARS:-$HOME/.cache/retina-jars}); they need a JDK 17 and Maven.
command -v mvn >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq maven; }
scripts/services/resolve.sh all >/dev/null
# The venv the client tests look for: <target dir>/py-clients.
venv="${CARGO_TARGET_DIR:-target}/py-clients"
# retina-storage's object-storage tests run moto's S3-compatible server from it too,
# and the Kafka tests produce with kafka-python.
# The published Delta and Iceberg tables are read back by DuckDB's delta and iceberg
# extensions, delta-rs, pyiceberg and Polars.
if ! "$venv/bin/python" -c 'import sqlalchemy, psycopg, moto.server, kafka, duckdb, duckdb_ext, deltalake, polars, pyarrow, pytz, pyiceberg' >/dev/null 2>&1 \
    || ! ls "$venv"/lib/python3*/site-packages/duckdb_ext/extensions/*/*/iceberg.duckdb_extension >/dev/null 2>&1; then
    echo "installing sqlalchemy, psycopg, moto[server], kafka-python and the Delta and Iceberg readers into $venv for the tests" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q 'sqlalchemy>=2,<3' 'psycopg[binary]>=3.1,<4' 'moto[server]>=5,<6' 'kafka-python>=2.0,<3' \
        'duckdb==1.4.4' 'duckdb-ext-delta==1.4.4.20260205' 'duckdb-ext-iceberg==1.4.4.20260205' 'duckdb-ext-avro==1.4.4.20260205' \
        'deltalake==1.6.6' 'polars==2.1.0' 'pyiceberg==0.12.0' 'pyarrow' 'pytz'
fi

# The layering rule: no import cycles between the modules of a crate.
python3 scripts/module_cycles.py

if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast
fi

# Fuzz smoke test: each cargo-fuzz target (fuzz/) for 30 s; fails on a crash and
# names its artifact. Its instrumented build is apart from the workspace's (see fuzz/README.md).
scripts/fuzz.sh 30
