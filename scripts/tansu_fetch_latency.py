#!/usr/bin/env python3
"""How long one record takes from produce to fetch on a Kafka-protocol broker, against
the number of record batches its partition already holds (BENCHMARKS.md, issue 14).

tansu 0.6's in-memory storage keeps each batch as its own object and lists all of a
partition's batches on every fetch that finds new records, so this latency grows with
what the partition holds; a Kafka broker finds the batch through its offset index.

    python3 scripts/tansu_fetch_latency.py 127.0.0.1:9092 [TOPIC]

Needs kafka-python (the test venv has it) and a running broker, e.g.
    tansu broker --listener-url tcp://127.0.0.1:9092 \
        --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine memory://tansu/
"""
import statistics
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

STORED = [10, 1000, 5000, 20000]
SAMPLES = 40


def main():
    broker = sys.argv[1]
    topic = sys.argv[2] if len(sys.argv) > 2 else "fetch-latency"
    KafkaAdminClient(bootstrap_servers=broker).create_topics([NewTopic(topic, 1, 1)])
    time.sleep(1)
    producer = KafkaProducer(bootstrap_servers=broker, linger_ms=0, acks=1)
    # A 1-ms fetch wait: the broker's long poll is not what is measured.
    consumer = KafkaConsumer(bootstrap_servers=broker, fetch_max_wait_ms=1, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    stored = 0
    print("batches held | produce to fetch, ms: min / median / max of %d" % SAMPLES)
    for target in STORED:
        while stored < target:
            producer.send(topic, b"x" * 1000).get()  # waiting for each ack: one batch per record
            stored += 1
        consumer.seek_to_end(partition)
        consumer.poll(timeout_ms=50)
        latencies = []
        for _ in range(SAMPLES):
            started = time.perf_counter()
            producer.send(topic, b"y" * 1000).get()
            stored += 1
            arrived = False
            while not arrived:
                arrived = any(records for records in consumer.poll(timeout_ms=1000).values())
            latencies.append((time.perf_counter() - started) * 1000)
        print("%12d | %.2f / %.2f / %.2f" % (stored, min(latencies), statistics.median(latencies), max(latencies)), flush=True)


if __name__ == "__main__":
    main()
