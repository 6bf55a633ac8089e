#!/usr/bin/env bash
# Resolves Spark 4.0.1 + Delta Lake 4.0.0 + Iceberg 1.10.0 (spark-runtime-4.0_2.13) once into
#   ${RETINA_JARS:-$HOME/.cache/retina-jars}/spark/
# from scripts/services/poms/spark/pom.xml (Maven Central through mvn, local repo ~/.m2).
# Idempotent: skipped while spark/.resolved holds a copy of the same pom (a changed pom resolves again).
# Prints the jar folder. Run a query session with:
#   java $(scripts/services/resolve_spark.sh --java-opts) -cp "$(scripts/services/resolve_spark.sh)/*" \
#        scripts/services/SparkRead.java
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${RETINA_JARS:-$HOME/.cache/retina-jars}"
dest="$cache/spark"
pom="$here/poms/spark/pom.xml"

if [[ "${1:-}" == "--java-opts" ]]; then
    # What Spark 4 needs from Java 17's module system.
    echo "-XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.lang.invoke=ALL-UNNAMED" \
         "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED" \
         "--add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED" \
         "--add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED" \
         "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED" \
         "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" \
         "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED --add-opens=java.base/sun.security.action=ALL-UNNAMED" \
         "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED -Djdk.reflect.useDirectMethodHandle=false" \
         "-Dio.netty.tryReflectionSetAccessible=true"
    exit 0
fi

if ! { [[ -f "$dest/.resolved" ]] && cmp -s "$pom" "$dest/.resolved"; }; then
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp"
    mvn -B -q -f "$pom" dependency:copy-dependencies \
        -DoutputDirectory="$dest.tmp" -Dmdep.useRepositoryLayout=false >&2
    cp "$pom" "$dest.tmp/.resolved"   # marker: the pom it came from
    rm -rf "$dest"
    mv "$dest.tmp" "$dest"
fi
echo "$dest"
