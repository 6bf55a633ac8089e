#!/usr/bin/env python3
"""Produces one source transaction of N inserts as Debezium on Kafka Connect lays it
out (BENCHMARKS.md, issue 14): table `s.t`'s topic `PREFIX.s.t` with 3 partitions,
keyed by primary key (so the transaction's events are spread over the partitions and
the source hands them over partition by partition, out of `total_order`), its BEGIN
and END on `PREFIX.transaction`, Kafka Connect's default JSON (schema envelope).

    python3 scripts/kafka_large_transaction.py 127.0.0.1:9092 PREFIX 300000
    retina ingest --data-dir DIR kafka://127.0.0.1:9092/PREFIX

Needs kafka-python (the test venv has it) and a running broker, e.g.
    tansu broker --listener-url tcp://127.0.0.1:9092 \
        --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine memory://tansu/
"""
import json
import sys
import time

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

KEY_SCHEMA = {"type": "struct", "name": "s.t.Key", "optional": False,
              "fields": [{"type": "int64", "optional": False, "field": "id"}]}
ROW = [{"type": "int64", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"}]
SCHEMA = {"type": "struct", "name": "s.t.Envelope", "optional": False, "fields": [
    {"type": "struct", "optional": True, "field": "before", "fields": ROW},
    {"type": "struct", "optional": True, "field": "after", "fields": ROW},
    {"type": "struct", "optional": False, "field": "source", "fields": [
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"}]},
    {"type": "string", "optional": False, "field": "op"},
    {"type": "struct", "optional": True, "field": "transaction", "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"}]}]}


def compact(value):
    return json.dumps(value, separators=(",", ":")).encode()


def main():
    broker, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    table_topic, transaction_topic = f"{prefix}.s.t", f"{prefix}.transaction"
    KafkaAdminClient(bootstrap_servers=broker).create_topics(
        [NewTopic(table_topic, 3, 1), NewTopic(transaction_topic, 1, 1)])
    time.sleep(1)
    producer = KafkaProducer(bootstrap_servers=broker, linger_ms=5, batch_size=512 * 1024, acks=1)
    tx = "big-1"
    producer.send(transaction_topic, compact({"status": "BEGIN", "id": tx, "event_count": None, "data_collections": None}))
    producer.flush()
    for order in range(1, count + 1):
        key = {"schema": KEY_SCHEMA, "payload": {"id": order}}
        payload = {"before": None, "after": {"id": order, "name": f"n{order}"}, "source": {"schema": "s", "table": "t"},
                   "op": "c", "transaction": {"id": tx, "total_order": order, "data_collection_order": order}}
        producer.send(table_topic, key=compact(key), value=compact({"schema": SCHEMA, "payload": payload}))
    producer.flush()
    end = {"status": "END", "id": tx, "event_count": count,
           "data_collections": [{"data_collection": "s.t", "event_count": count}]}
    producer.send(transaction_topic, compact(end))
    producer.flush()
    print(f"produced one transaction of {count} events to {table_topic} (3 partitions) and {transaction_topic}")


if __name__ == "__main__":
    main()
