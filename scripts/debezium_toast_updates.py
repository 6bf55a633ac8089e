"""A Debezium JSON stream (Kafka Connect's default: schema envelope and key) of N
inserts of rows with a ~1 KB text column in transactions of 1,000, then U updates in
transactions of T that change `name` and leave `body` unchanged: Debezium's
unavailable-value placeholder, as PostgreSQL's unchanged TOAST values arrive
(BENCHMARKS.md, issue 16). Keys of the updates are spread over the table.

    python3 scripts/debezium_toast_updates.py N U T OUT.jsonl
    retina ingest --data-dir DIR file:OUT.jsonl
"""
import sys, random
KEY_SCHEMA='{"type":"struct","name":"s.docs.Key","optional":false,"fields":[{"type":"int64","optional":false,"field":"id"}]}'
ROW='[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"},{"type":"string","optional":true,"field":"body"}]'
SCHEMA='{"type":"struct","name":"s.docs.Envelope","optional":false,"fields":[{"type":"struct","optional":true,"field":"before","fields":%s},{"type":"struct","optional":true,"field":"after","fields":%s},{"type":"string","optional":false,"field":"op"},{"type":"struct","optional":true,"field":"transaction","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}]}]}'%(ROW,ROW)
n, u, per, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
out = open(path, 'w')
rnd = random.Random(7)
def line(op, id, name, body, tx, order):
    b = '"%s"' % body
    payload = '{"before":null,"after":{"id":%d,"name":"%s","body":%s},"source":{"connector":"postgresql","db":"d","schema":"s","table":"docs"},"op":"%s","transaction":{"id":"%s","total_order":%d,"data_collection_order":%d}}' % (id, name, b, op, tx, order, order)
    return '{"key":{"schema":%s,"payload":{"id":%d}},"value":{"schema":%s,"payload":%s}}\n' % (KEY_SCHEMA, id, SCHEMA, payload)
def txn(events, t):
    out.write('{"status":"BEGIN","id":"%s","event_count":null,"data_collections":null}\n' % t)
    for i, (op, id, name, body) in enumerate(events):
        out.write(line(op, id, name, body, t, i + 1))
    out.write('{"status":"END","id":"%s","event_count":%d,"data_collections":[{"data_collection":"s.docs","event_count":%d}]}\n' % (t, len(events), len(events)))
tx = 0
for start in range(1, n + 1, 1000):
    tx += 1
    txn([("c", id, "n%d" % id, ("body-%d-" % id) + "x" * 1000) for id in range(start, min(n, start + 999) + 1)], "t%d" % tx)
keys = rnd.sample(range(1, n + 1), u)
for start in range(0, u, per):
    tx += 1
    txn([("u", id, "m%d" % id, "__debezium_unavailable_value") for id in keys[start:start + per]], "t%d" % tx)
