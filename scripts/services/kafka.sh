#!/usr/bin/env bash
# A single-node Apache Kafka 4.4 broker (KRaft, combined broker + controller) on 127.0.0.1, from the jars that
# resolve.sh put in ${RETINA_JARS:-$HOME/.cache/retina-jars}/kafka.
#
#   kafka.sh start DIR PORT   formats DIR/data (new cluster id) unless already formatted, starts the broker with its
#                             client listener on 127.0.0.1:PORT and its controller on a free port, waits until PORT
#                             listens, prints the JVM's pid (also in DIR/kafka.pid). Output in DIR/kafka.log.
#   kafka.sh stop DIR         SIGTERM (then SIGKILL after 20 s) to the pid in DIR/kafka.pid.
#
# Env: KAFKA_HEAP_OPTS (default -Xms256m -Xmx512m), KAFKA_LOG_LEVEL (default WARN),
#      KAFKA_CONTROLLER_PORT (default: a free port; a restart on a formatted DIR keeps the one it had), KAFKA_START_TIMEOUT seconds (default 120).
# The time from JVM start to listening goes to stderr as "kafka: listening after N ms".
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/common.sh"

cmd="${1:-}"; dir="${2:-}"
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2; }
case "$cmd" in
stop) stop_pidfile "$dir/kafka.pid"; exit 0 ;;
start) ;;
*) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac

port="${3:?usage: $0 start DIR PORT}"
jars="$RETINA_JARS/kafka"
[[ -f "$jars/.resolved" ]] || "$here/resolve.sh" kafka >/dev/null
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
if [[ -f "$dir/kafka.pid" ]] && kill -0 "$(cat "$dir/kafka.pid")" 2>/dev/null; then
    echo "kafka: already running in $dir (pid $(cat "$dir/kafka.pid"))" >&2; exit 1
fi
# A restart keeps the controller port: the formatted log records the controller's endpoint (--standalone).
old_cport="$(sed -n 's/^controller.quorum.bootstrap.servers=127.0.0.1://p' "$dir/server.properties" 2>/dev/null || true)"
if [[ -f "$dir/data/meta.properties" && -n "$old_cport" ]]; then cport="$old_cport"
else cport="${KAFKA_CONTROLLER_PORT:-$(free_port)}"; fi

cat > "$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$dir/data
auto.create.topics.enable=true
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
write_log4j2 "$dir/log4j2.properties" "${KAFKA_LOG_LEVEL:-WARN}"

jvm=(java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true
     -Dlog4j2.configurationFile="$dir/log4j2.properties" -Dkafka.logs.dir="$dir" -cp "$jars/*")

if [[ ! -f "$dir/data/meta.properties" ]]; then
    t0=$(now_ms)
    "${jvm[@]}" kafka.tools.StorageTool format -t "$(cluster_id)" \
        -c "$dir/server.properties" --standalone > "$dir/format.log" 2>&1 \
        || { cat "$dir/format.log" >&2; exit 1; }
    echo "kafka: formatted $dir/data in $(( $(now_ms) - t0 )) ms" >&2
fi

t0=$(now_ms)
( exec "${jvm[@]}" kafka.Kafka "$dir/server.properties" >> "$dir/kafka.log" 2>&1 ) &
pid=$!
echo "$pid" > "$dir/kafka.pid"
if ! wait_listen "$pid" "$port" "${KAFKA_START_TIMEOUT:-120}"; then
    echo "kafka: did not listen on 127.0.0.1:$port; tail of $dir/kafka.log:" >&2
    tail -n 30 "$dir/kafka.log" >&2
    stop_pidfile "$dir/kafka.pid" 5
    exit 1
fi
echo "kafka: listening on 127.0.0.1:$port (controller $cport) after $(( $(now_ms) - t0 )) ms, pid $pid" >&2
echo "$pid"
