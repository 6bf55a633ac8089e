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
    # Reflection, as Table(autoload_with=), pandas read_sql_table and Superset use it.
    step("schema_names", lambda: sorted(inspect(engine).get_schema_names()))
    step(
        "columns",
        lambda: [[c["name"], str(c["type"]), c["nullable"]] for c in inspect(engine).get_columns("items", schema="shop")],
    )
    step("pk_constraint", lambda: inspect(engine).get_pk_constraint("items", schema="shop"))
    step("indexes", lambda: inspect(engine).get_indexes("items", schema="shop"))
    step("unique_constraints", lambda: inspect(engine).get_unique_constraints("items", schema="shop"))
    step("foreign_keys", lambda: inspect(engine).get_foreign_keys("items", schema="shop"))

    def autoload():
        table = sqlalchemy.Table("items", sqlalchemy.MetaData(), autoload_with=engine, schema="shop")
        with engine.connect() as connection:
            first = connection.execute(sqlalchemy.select(table).where(table.c.id == 2)).one()
        return {"columns": [c.name for c in table.columns], "primary_key": [c.name for c in table.primary_key], "row": list(first)}

    step("autoload", autoload)

    # Reading a result in pieces: SQLAlchemy's stream_results and psycopg's named
    # (server-side) cursors declare a cursor and fetch from it.
    def streamed():
        with engine.connect() as connection:
            result = connection.execution_options(stream_results=True, max_row_buffer=7).execute(
                text("SELECT id FROM shop.items ORDER BY id")
            )
            return [row[0] for row in result]

    step("stream_results", streamed)

    def named_cursor():
        import psycopg

        with psycopg.connect(f"postgresql://retina@{host}:{port}/retina") as connection:
            with connection.cursor(name="pieces") as cursor:
                cursor.execute("SELECT id, name FROM shop.items WHERE id <= %s ORDER BY id", (15,))
                first, second, rest = cursor.fetchmany(4), cursor.fetchmany(4), cursor.fetchall()
            with connection.cursor(name="binary", binary=True) as cursor:
                cursor.execute("SELECT qty FROM shop.items WHERE id = 3")
                binary = cursor.fetchall()
        return {"sizes": [len(first), len(second), len(rest)], "first": list(first[0]), "last": list(rest[-1]), "binary": [list(r) for r in binary]}

    step("named_cursor", named_cursor)
    results["sqlalchemy"] = sqlalchemy.__version__
    print(json.dumps(results, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
