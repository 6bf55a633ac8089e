# Sourced by kafka.sh and connect.sh.
RETINA_JARS="${RETINA_JARS:-$HOME/.cache/retina-jars}"

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until 127.0.0.1:$2 accepts connections while pid $1 lives; $3 = timeout in seconds.
wait_listen() {
    local pid="$1" port="$2" timeout="${3:-120}" start=$SECONDS
    while (( SECONDS - start < timeout )); do
        if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

now_ms() { date +%s%3N; }

# Stops the JVM whose pid is in file $1: SIGTERM, then SIGKILL after $2 seconds (default 20).
stop_pidfile() {
    local file="$1" grace="${2:-20}" pid
    [[ -f "$file" ]] || return 0
    pid="$(cat "$file")"
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq $((grace * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

write_log4j2() { # file level
    cat > "$1" <<EOF2
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = $2
rootLogger.appenderRef.out.ref = out
EOF2
}

# A new Kafka cluster id (what `StorageTool random-uuid` prints: a UUID in URL-safe base64, no padding),
# without starting a JVM for it.
cluster_id() {
    python3 -c 'import base64,uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))'
}
