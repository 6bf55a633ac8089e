#!/usr/bin/env python3
"""What Debezium PostgreSQL 3.6.1 (on Kafka Connect 4.3, Kafka 4.4 broker, provide.transaction.metadata=true)
puts on Kafka through a snapshot, streaming, and a SIGKILL of the Connect worker; writes every record of the
data topics, the transaction topic and Connect's offsets topic to OUT, one JSON object a line:
{"topic","partition","offset","timestamp" (CreateTime, ms),"key","value"} with key and value the record's bytes
verbatim (UTF-8 text, JsonConverter with schemas), sorted by topic, partition, offset.

Scenarios (tables public.accounts(id, name, balance) and public.orders(id serial, account_id, amount)):
  stream        offset.flush.interval.ms=60000: snapshot (2 accounts, 1 order), 2 transactions, wait for an
                offset flush, then one transaction every 0.4 s (update accounts 2 + insert an order); SIGKILL
                the worker after 6 or more of them reached Kafka; the rest commit while it is down; restart.
  offset-in-txn offset.flush.interval.ms=1000 and a broker producer quota (so one transaction of 14 changes
                takes seconds to reach Kafka): SIGKILL once an offset flushed in the middle of it; restart.
  kill-in-txn   as offset-in-txn with offset.flush.interval.ms=60000: the last flushed offset is the commit of
                the transaction before; SIGKILL in the middle of delivering the big one; restart.

Needs kafka-python and psycopg2 (e.g. a venv: pip install kafka-python psycopg2-binary), java, the jars of
resolve.sh, and a PostgreSQL with wal_level=logical on 127.0.0.1 (postgres.sh start DIR PORT).
Usage: debezium_restart_probe.py SCENARIO PGPORT WORKDIR OUT.jsonl
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import psycopg2
from kafka import KafkaConsumer, TopicPartition

HERE = os.path.dirname(os.path.abspath(__file__))
JARS = os.environ.get("RETINA_JARS", os.path.expanduser("~/.cache/retina-jars"))
scenario, pgport, work, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert scenario in ("stream", "offset-in-txn", "kill-in-txn"), scenario
FLUSH_MS = {"stream": 60000, "offset-in-txn": 1000, "kill-in-txn": 60000}[scenario]
T0 = time.time()
GROUP = "probe-connect"
OFFSETS = GROUP + "-offsets"
TOPICS = ["dbz.public.accounts", "dbz.public.orders", "dbz.transaction", OFFSETS]


def log(*a):
    print(f"[{time.time() - T0:7.2f}s]", *a, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run(cmd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, capture_output=True, text=True, env=e)
    sys.stdout.write(r.stderr)
    if r.returncode != 0:
        raise SystemExit(f"{cmd} failed: {r.stdout} {r.stderr}")
    return r.stdout.strip()


os.makedirs(work, exist_ok=True)
kport, cport = free_port(), free_port()
boot = f"127.0.0.1:{kport}"
kdir, cdir = f"{work}/kafka", f"{work}/connect"
cenv = {"CONNECT_OFFSET_FLUSH_MS": str(FLUSH_MS), "CONNECT_GROUP_ID": GROUP}


def start_connect():
    return run([f"{HERE}/connect.sh", "start", cdir, boot, str(cport)], cenv)


def topics():
    c = KafkaConsumer(bootstrap_servers=boot)
    t = c.topics()
    c.close()
    return t


def count(topic):
    """Records in all partitions of topic (0 if it does not exist; never creates it)."""
    if topic not in topics():
        return 0
    c = KafkaConsumer(bootstrap_servers=boot)
    tps = [TopicPartition(topic, p) for p in c.partitions_for_topic(topic)]
    e = c.end_offsets(tps)
    c.close()
    return sum(e.values())


def read_all(topic):
    c = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    recs = []
    while any(c.position(tp) < end[tp] for tp in tps):
        for _, rs in c.poll(timeout_ms=1000).items():
            recs.extend(rs)
    c.close()
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def wait_for(pred, what, timeout=120):
    t = time.time()
    while time.time() - t < timeout:
        if pred():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def quota(add):
    """A producer byte rate for every client id: the broker delays its answers, so records trickle in."""
    change = ["--add-config", "producer_byte_rate=2500"] if add else ["--delete-config", "producer_byte_rate"]
    run(["java", "-cp", f"{JARS}/kafka/*", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", boot,
         "--alter", "--entity-type", "clients", "--entity-default", *change])


log("kafka pid", run([f"{HERE}/kafka.sh", "start", kdir, str(kport)]))
log("connect pid", start_connect())

pg = psycopg2.connect(host="127.0.0.1", port=pgport, user="postgres", dbname="postgres")
pg.autocommit = True
cur = pg.cursor()
cur.execute("DROP TABLE IF EXISTS accounts, orders")
cur.execute("CREATE TABLE accounts (id int PRIMARY KEY, name text NOT NULL, balance int NOT NULL)")
cur.execute("CREATE TABLE orders (id serial PRIMARY KEY, account_id int NOT NULL, amount int NOT NULL)")
cur.execute("INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'bob', 200)")
cur.execute("INSERT INTO orders (account_id, amount) VALUES (1, 10)")


def txn(stmts):
    pg.autocommit = False
    c = pg.cursor()
    c.execute("SELECT txid_current()")
    xid = c.fetchone()[0]
    for s in stmts:
        c.execute(s)
    pg.commit()
    pg.autocommit = True
    return xid


slot = f"retina_probe_{int(time.time())}"
config = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "tasks.max": "1",
    "database.hostname": "127.0.0.1", "database.port": str(pgport),
    "database.user": "postgres", "database.password": "unused", "database.dbname": "postgres",
    "topic.prefix": "dbz", "plugin.name": "pgoutput", "slot.name": slot,
    "publication.name": slot + "_pub", "publication.autocreate.mode": "filtered",
    "table.include.list": "public.accounts,public.orders",
    "provide.transaction.metadata": "true",
}
if scenario != "stream":
    # One record per produce request, so that the broker's quota paces records one by one.
    config.update({"producer.override.batch.size": "1", "producer.override.linger.ms": "0",
                   "producer.override.max.in.flight.requests.per.connection": "1"})
t_reg = time.time()
req = urllib.request.Request(f"http://127.0.0.1:{cport}/connectors",
                             data=json.dumps({"name": "dbz-pg", "config": config}).encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
log("registered:", urllib.request.urlopen(req).status)
wait_for(lambda: count("dbz.public.accounts") > 0, "first snapshot record")
log(f"TIMING registration -> first snapshot record on Kafka: {time.time() - t_reg:.2f} s")
wait_for(lambda: count("dbz.public.accounts") >= 2 and count("dbz.public.orders") >= 1, "snapshot")
log(f"TIMING registration -> whole snapshot on Kafka: {time.time() - t_reg:.2f} s")
time.sleep(5)
log("topics 5 s after the snapshot, before any streamed transaction:",
    sorted(t for t in topics() if not t.startswith("__")))

x1 = txn(["INSERT INTO orders (account_id, amount) VALUES (2, 20), (2, 21)"])
t1 = time.time()
wait_for(lambda: "dbz.transaction" in topics(), "dbz.transaction", 60)
log(f"dbz.transaction exists {time.time() - t1:.2f} s after the commit of the first transaction after the snapshot")
x2 = txn(["UPDATE accounts SET balance = balance - 5 WHERE id = 1",
          "INSERT INTO orders (account_id, amount) VALUES (1, 5)"])
wait_for(lambda: count("dbz.public.orders") >= 4, "the first two transactions")
n_off = count(OFFSETS)
log(f"xids {x1} {x2} on Kafka; waiting for an offset flush (offset.flush.interval.ms={FLUSH_MS})")
wait_for(lambda: count(OFFSETS) > n_off, "an offset flush", FLUSH_MS / 1000 + 30)
xids = [x1, x2]
cpid = int(open(f"{cdir}/connect.pid").read())

if scenario == "stream":
    stream = []

    def go():
        for i in range(1, 13):
            stream.append(txn([f"UPDATE accounts SET balance = balance + {i} WHERE id = 2",
                               f"INSERT INTO orders (account_id, amount) VALUES (2, {100 + i})"]))
            time.sleep(0.4)

    th = threading.Thread(target=go)
    th.start()
    wait_for(lambda: count("dbz.public.orders") >= 4 + 6, "six streamed transactions on Kafka")
    os.kill(cpid, signal.SIGKILL)
    at_kill = {t: count(t) for t in TOPICS}
    log(f"SIGKILL connect (pid {cpid}); xids committed so far {stream}")
    th.join()
    xids += stream
else:
    quota(True)
    time.sleep(2)
    big = txn(["UPDATE accounts SET balance = 0 WHERE id = 1",
               "INSERT INTO orders (account_id, amount) SELECT 1, g FROM generate_series(1, 12) g",
               "UPDATE accounts SET balance = 1 WHERE id = 2"])
    log(f"committed xid {big} (14 changes) under the quota")

    def mid():
        if count("dbz.public.orders") - 4 < 6:
            return False
        return scenario == "kill-in-txn" or any(b'"messageType":"INSERT"' in r.value for r in read_all(OFFSETS))

    wait_for(mid, "the middle of the big transaction", 120)
    os.kill(cpid, signal.SIGKILL)
    at_kill = {t: count(t) for t in TOPICS}
    log(f"SIGKILL connect (pid {cpid}) in the middle of xid {big}")
    quota(False)
    xids += [big, txn(["INSERT INTO orders (account_id, amount) VALUES (2, 2)"])]

log("end offsets just after the kill:", at_kill)
for r in read_all(OFFSETS):
    log("flushed offset:", r.partition, r.offset, r.value.decode())
time.sleep(1)
os.remove(f"{cdir}/connect.pid")
t_re = time.time()
log("connect restarted, pid", start_connect())


def settled():
    a = [count(t) for t in TOPICS]
    time.sleep(4)
    return a == [count(t) for t in TOPICS] and a[2] > at_kill["dbz.transaction"]


wait_for(settled, "the re-sent records", 180)
final = {t: count(t) for t in TOPICS}
log(f"settled {time.time() - t_re:.1f} s after the restart; end offsets:", final)

lines = []
for t in TOPICS:
    for r in read_all(t):
        lines.append({"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
                      "key": None if r.key is None else r.key.decode(),
                      "value": None if r.value is None else r.value.decode()})
with open(out, "w") as f:
    for line in lines:
        f.write(json.dumps(line) + "\n")
log(f"wrote {out}: {len(lines)} records, {os.path.getsize(out)} bytes; xids {xids}; end offsets at the kill {at_kill}")

run([f"{HERE}/connect.sh", "stop", cdir])
run([f"{HERE}/kafka.sh", "stop", kdir])
cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
cur.execute(f"DROP PUBLICATION IF EXISTS {slot}_pub")
log("stopped Connect and Kafka; dropped the slot and the publication")
