#!/usr/bin/env bash
# Resolves the jars of the real Kafka services that tests run, once, into a cache outside the clone:
#   ${RETINA_JARS:-$HOME/.cache/retina-jars}/kafka/                            Apache Kafka 4.4.0 broker (KRaft) + tools
#   ${RETINA_JARS:-$HOME/.cache/retina-jars}/connect/                          Kafka Connect 4.3.0 worker
#   ${RETINA_JARS:-$HOME/.cache/retina-jars}/connect-plugins/debezium-postgres/ Debezium PostgreSQL 3.6.1.Final plugin
#   ${RETINA_JARS:-$HOME/.cache/retina-jars}/spark/                            Spark 4.0.1 + Delta 4.0 + Iceberg 1.10 (resolve_spark.sh)
# Usage: resolve.sh [kafka|connect|spark|all]   (default all). Prints the cache dir. Idempotent: a component whose
# .resolved marker exists is skipped. Uses Maven Central through mvn, local repo ~/.m2 (Maven's default).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RETINA_JARS:-$HOME/.cache/retina-jars}"

copy() { # pom-name dest-dir
    local pom="$here/poms/$1.xml" dest="$2"
    if [[ -f "$dest/.resolved" ]] && cmp -s "$pom" "$dest/.resolved"; then return 0; fi
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    if ! mvn -B -q -Dstyle.color=never -f "$pom" dependency:copy-dependencies \
        -DoutputDirectory="$dest.tmp" -Dmdep.useRepositoryLayout=false > "$dest.log" 2>&1; then
        cat "$dest.log" >&2; exit 1
    fi
    rm -f "$dest.log"
    cp "$pom" "$dest.tmp/.resolved"   # marker: the pom it came from (a changed pom resolves again)
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
}

what="${1:-all}"
case "$what" in
    kafka) copy kafka "$cache/kafka" ;;
    connect) copy connect "$cache/connect"; copy debezium-postgres "$cache/connect-plugins/debezium-postgres" ;;
    spark) "$here/resolve_spark.sh" >/dev/null ;;
    all) copy kafka "$cache/kafka"
         copy connect "$cache/connect"
         copy debezium-postgres "$cache/connect-plugins/debezium-postgres"
         "$here/resolve_spark.sh" >/dev/null ;;
    *) echo "usage: $0 [kafka|connect|spark|all]" >&2; exit 2 ;;
esac
echo "$cache"
