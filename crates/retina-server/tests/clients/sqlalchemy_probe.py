"""Connects to Retina through SQLAlchemy + psycopg 3, as pandas and Superset do.

Usage: python sqlalchemy_probe.py HOST PORT
Prints one JSON object: each step's result, or {"error": ...} for a step that failed
(the exit status is then 1). Run by crates/retina-server/tests/clients.rs.
"""

import json
import sys
import traceback

import sqlalchemy
from sqlalchemy import create_engine, inspect, text


def main() -> int:
    host, port = sys.argv[1], sys.argv[2]
    engine = create_engine(f"postgresql+psycopg://retina@{host}:{port}/retina")
    results = {}
    failed = False

    def step(name, run):
        nonlocal failed
        try:
            results[name] = run()
        except Exception as error:  # every failure is reported, none stops the rest
            failed = True
            results[name] = {"error": f"{type(error).__name__}: {error}"}
            traceback.print_exc(file=sys.stderr)

    def with_connection(run):
        # A fresh connection per step: the first one runs the dialect's set-up
        # queries (version, current_schema, standard_conforming_strings, ...).
        with engine.connect() as connection:
            return run(connection)

    step("select_1", lambda: with_connection(lambda c: c.execute(text("SELECT 1")).scalar()))
    step("server_version_info", lambda: list(engine.dialect.server_version_info))
    step("default_schema_name", lambda: engine.dialect.default_schema_name)
    step(
        "rows",
        lambda: with_connection(
            lambda c: [
                list(row)
                for row in c.execute(
                    text("SELECT id, name, qty FROM shop.items WHERE id <= :n ORDER BY id"), {"n": 3}
                )
            ]
        ),
    )
    step("tables", lambda: sorted(inspect(engine).get_table_names(schema="shop")))
    results["sqlalchemy"] = sqlalchemy.__version__
    print(json.dumps(results, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
