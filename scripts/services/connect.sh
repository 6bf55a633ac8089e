#!/usr/bin/env bash
# A Kafka Connect 4.3 distributed worker on 127.0.0.1 with the Debezium PostgreSQL plugin, from the jars that
# resolve.sh put in ${RETINA_JARS:-$HOME/.cache/retina-jars}/connect and .../connect-plugins.
# (Connect 4.3, not 4.4: Debezium 3.6.1 is built against Kafka 4.3 and its task fails on Connect 4.4.0 with
# NoClassDefFoundError: org/apache/kafka/common/utils/Sanitizer. A 4.3 worker runs fine against a 4.4 broker.)
#
#   connect.sh start DIR BOOTSTRAP PORT   starts a worker (REST on http://127.0.0.1:PORT) whose config, offsets and
#                                         status live in topics on BOOTSTRAP, waits until its REST API answers,
#                                         prints the JVM's pid (also in DIR/connect.pid). Output in DIR/connect.log.
#   connect.sh stop DIR                   SIGTERM (then SIGKILL after 20 s) to the pid in DIR/connect.pid.
#
# Env: CONNECT_GROUP_ID (default retina-connect; its topics are <group>-configs/-offsets/-status),
#      CONNECT_OFFSET_FLUSH_MS (offset.flush.interval.ms, default 1000), CONNECT_HEAP_OPTS (default -Xms256m -Xmx1g),
#      CONNECT_LOG_LEVEL (default WARN), CONNECT_START_TIMEOUT seconds (default 180).
# The time from JVM start to the REST API answering goes to stderr as "connect: ready after N ms".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"

usage() { echo "usage: $0 start DIR BOOTSTRAP PORT | stop DIR" >&2; exit 2; }
cmd="${1:-}"; dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || usage
case "$cmd" in
stop) stop_pidfile "$dir/connect.pid"; exit 0 ;;
start) ;;
*) usage ;;
esac
bootstrap="${3:-}"; port="${4:-}"
[[ -n "$bootstrap" && -n "$port" ]] || usage

jars="$RETINA_JARS/connect"
plugins="$RETINA_JARS/connect-plugins"
[[ -f "$jars/.resolved" && -f "$plugins/debezium-postgres/.resolved" ]] || "$here/resolve.sh" connect >/dev/null
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
if [[ -f "$dir/connect.pid" ]] && kill -0 "$(cat "$dir/connect.pid")" 2>/dev/null; then
    echo "connect: already running in $dir (pid $(cat "$dir/connect.pid"))" >&2; exit 1
fi
group="${CONNECT_GROUP_ID:-retina-connect}"

cat > "$dir/connect.properties" <<PROPS
bootstrap.servers=$bootstrap
listeners=http://127.0.0.1:$port
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$port
group.id=$group
config.storage.topic=$group-configs
offset.storage.topic=$group-offsets
status.storage.topic=$group-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
offset.flush.interval.ms=${CONNECT_OFFSET_FLUSH_MS:-1000}
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
plugin.path=$plugins
plugin.discovery=service_load
PROPS
write_log4j2 "$dir/log4j2.properties" "${CONNECT_LOG_LEVEL:-WARN}"

t0=$(now_ms)
( exec java ${CONNECT_HEAP_OPTS:--Xms256m -Xmx1g} -XX:+UseG1GC -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$jars/*" \
      org.apache.kafka.connect.cli.ConnectDistributed "$dir/connect.properties" >> "$dir/connect.log" 2>&1 ) &
pid=$!
echo "$pid" > "$dir/connect.pid"
timeout="${CONNECT_START_TIMEOUT:-180}"
if ! wait_listen "$pid" "$port" "$timeout"; then
    echo "connect: did not listen on 127.0.0.1:$port; tail of $dir/connect.log:" >&2
    tail -n 30 "$dir/connect.log" >&2; stop_pidfile "$dir/connect.pid" 5; exit 1
fi
t_listen=$(( $(now_ms) - t0 ))
# The REST server listens before the worker has joined its group and read the config topic; until then
# GET /connectors answers 503 or times out. Ready = it answers 200.
start=$SECONDS
until curl -sf -m 5 -o /dev/null "http://127.0.0.1:$port/connectors"; do
    if ! kill -0 "$pid" 2>/dev/null || (( SECONDS - start > timeout )); then
        echo "connect: REST API never ready; tail of $dir/connect.log:" >&2
        tail -n 30 "$dir/connect.log" >&2; stop_pidfile "$dir/connect.pid" 5; exit 1
    fi
    sleep 0.2
done
echo "connect: listening on 127.0.0.1:$port after $t_listen ms, ready after $(( $(now_ms) - t0 )) ms, pid $pid" >&2
echo "$pid"
