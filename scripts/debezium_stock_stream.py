#!/usr/bin/env python3
"""A CH-benCHmark-like `stock` change stream as Kafka Connect writes Debezium's
PostgreSQL events by default (JsonConverter, schemas.enable=true): every line is
{"key":{"schema":...,"payload":...},"value":{"schema":...,"payload":...}}.

Inserts of the base rows first (one source transaction per 100), then updates of
random rows (one transaction per 10; before-images only with
--replica-identity-full, as PostgreSQL sends them), as
`retina ingest --source FILE` reads it:

    python3 scripts/debezium_stock_stream.py --changes 2000000 --base 200000 > stock.jsonl
    retina ingest --source stock.jsonl --data-dir /tmp/lake
"""

import argparse
import json
import random
import sys

COLUMNS = (
    [("s_w_id", "int32", False), ("s_i_id", "int32", False), ("s_quantity", "int32", True)]
    + [(f"s_dist_{d:02}", "string", True) for d in range(1, 11)]
    + [("s_ytd", "int32", True), ("s_order_cnt", "int32", True), ("s_remote_cnt", "int32", True), ("s_data", "string", True)]
)
TOPIC = "dbserver1.public.stock"


def struct(name, fields, optional, field=None):
    schema = {"type": "struct", "fields": fields, "optional": optional, "name": name}
    if field:
        schema["field"] = field
    return schema


def columns_schema():
    return [{"type": t, "optional": o, "field": n} for n, t, o in COLUMNS]


SOURCE_SCHEMA = struct(
    "io.debezium.connector.postgresql.Source",
    [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
         "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
    ],
    False,
    "source",
)
VALUE_SCHEMA = json.dumps(
    struct(
        TOPIC + ".Envelope",
        [
            struct(TOPIC + ".Value", columns_schema(), True, "before"),
            struct(TOPIC + ".Value", columns_schema(), True, "after"),
            SOURCE_SCHEMA,
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
        False,
    ),
    separators=(",", ":"),
)
KEY_SCHEMA = json.dumps(struct(TOPIC + ".Key", columns_schema()[:2], False), separators=(",", ":"))


def row(rng, w, i):
    values = [w, i, rng.randint(10, 100)] + ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=24)) for _ in range(10)]
    return values + [0, 0, 0, "".join(rng.choices("abcdefghijklmnopqrstuvwxyz ", k=40))]


def image(values):
    return dict(zip((c[0] for c in COLUMNS), values))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=2_000_000, help="row changes in all (inserts included)")
    parser.add_argument("--base", type=int, default=200_000, help="rows inserted first")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--replica-identity-full", action="store_true",
                        help="updates carry their before-image (PostgreSQL's default, REPLICA IDENTITY DEFAULT, sends null)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    items = 100_000
    rows = {}
    out = sys.stdout
    lsn, tx = 1_000_000, 500
    for n in range(args.changes):
        if n < args.base:
            w, i = n // items + 1, n % items + 1
            before, op = None, "c"
            rows[(w, i)] = row(rng, w, i)
            if n % 100 == 0:
                tx += 1
        else:
            k = rng.randrange(args.base)
            w, i = k // items + 1, k % items + 1
            old = rows[(w, i)]
            before, op = (image(old) if args.replica_identity_full else None), "u"
            new = list(old)
            new[2] = rng.randint(10, 100)
            new[13] += rng.randint(1, 10)
            new[14] += 1
            rows[(w, i)] = new
            if (n - args.base) % 10 == 0:
                tx += 1
        lsn += 64
        payload = {
            "before": before,
            "after": image(rows[(w, i)]),
            "source": {"version": "2.7.3.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": 1709288130000,
                       "snapshot": "false", "db": "postgres", "sequence": f'["{lsn - 64}","{lsn}"]', "schema": "public",
                       "table": "stock", "txId": tx, "lsn": lsn, "xmin": None},
            "op": op,
            "ts_ms": 1709288130500,
            "transaction": None,
        }
        key = json.dumps({"s_w_id": w, "s_i_id": i}, separators=(",", ":"))
        value = json.dumps(payload, separators=(",", ":"))
        out.write(f'{{"key":{{"schema":{KEY_SCHEMA},"payload":{key}}},"value":{{"schema":{VALUE_SCHEMA},"payload":{value}}}}}\n')


if __name__ == "__main__":
    main()
