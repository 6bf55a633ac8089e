#!/bin/bash
# CPU an idle `retina serve` uses, by thread kind, over 30 s.
# usage: scripts/idle_cpu.sh RETINA_BINARY DATA_DIR
# Starts the server on the data dir, waits until /metrics answers (recovery done)
# and 10 s more, then prints the CPU ticks (10 ms each) each kind of thread used in
# the next 30 s, from /proc/PID/task/*/stat, and the bytes it wrote meanwhile
# (/proc/PID/io).
set -euo pipefail
retina=$1; lake=$2
"$retina" serve --data-dir "$lake" --listen 127.0.0.1:15433 --metrics-listen 127.0.0.1:19187 > /dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for waited in $(seq 1 600); do
    curl -s 127.0.0.1:19187/metrics > /dev/null && break
    kill -0 $pid 2>/dev/null || { echo "retina serve exited before answering" >&2; exit 1; }
    sleep 1
done
sleep 10
snapshot() { for task in /proc/$pid/task/*; do echo "$(basename "$task") $(tr ' ' _ < "$task/comm") $(awk '{print $14+$15}' "$task/stat")"; done; }
written() { awk '/^write_bytes/ {print $2}' /proc/$pid/io; }
snapshot > /tmp/idle_cpu.before; written_before=$(written); sleep 30; snapshot > /tmp/idle_cpu.after
echo "load=$(cut -d' ' -f1 /proc/loadavg) up_after_s=$waited written_bytes=$(( $(written) - written_before )) $(join /tmp/idle_cpu.before /tmp/idle_cpu.after | awk '{k=$2; sub(/-[0-9]+$/,"",k); d[k]+=$5-$3; total+=$5-$3} END {printf "all=%d", total; for (k in d) if (d[k]>0) printf " %s=%d", k, d[k]}')"
