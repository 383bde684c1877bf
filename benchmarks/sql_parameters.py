"""What a query parameter costs in ``execute_sql``, against the same query with a literal.

    python benchmarks/sql_parameters.py sqlite:///params.db
    python benchmarks/sql_parameters.py postgresql://user@host/db --calls 2000
    PYTHONPATH=/path/to/other/checkout python benchmarks/sql_parameters.py URL

Each call is a snapshot that runs ``SELECT UserName FROM Users WHERE UserId = …`` and reads
its one row: with a literal (``= 1``: a kept plan since plans without parameters were kept),
and with ``= @id`` (a new id each call). The two alternate for ``--rounds`` rounds of
``--calls`` calls; the figures are medians of the rounds, in microseconds a call, and the
ratio of the two in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import txqueue


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    db = txqueue.connect(args.url, dialect="googlesql")
    table = "ParamCost" + uuid.uuid4().hex[:8]
    db.update_ddl(
        [f"CREATE TABLE {table} (UserId INT64 NOT NULL, UserName STRING(MAX)) PRIMARY KEY (UserId)"]
    )
    try:
        db.run_in_transaction(
            lambda txn: txn.execute_update(
                f"INSERT INTO {table} (UserId, UserName) VALUES (1, 'ada'), (2, 'grace')"
            )
        )
        literal = f"SELECT UserName FROM {table} WHERE UserId = 1"
        parameter = f"SELECT UserName FROM {table} WHERE UserId = @id"

        def timed(sql: str, with_parameter: bool) -> float:
            started = time.perf_counter()
            for call in range(args.calls):
                params = {"id": 1 + call % 2} if with_parameter else None
                with db.snapshot() as snapshot:
                    [row] = list(snapshot.execute_sql(sql, params=params))
                    assert row[0] in ("ada", "grace")
            return (time.perf_counter() - started) / args.calls * 1e6

        timed(literal, False)  # warm both: imports, connections, the kept plans
        timed(parameter, True)
        seconds: dict[str, list[float]] = {"literal": [], "parameter": []}
        for round_number in range(args.rounds):
            order = [("literal", literal, False), ("parameter", parameter, True)]
            for name, sql, with_parameter in order if round_number % 2 == 0 else order[::-1]:
                seconds[name].append(timed(sql, with_parameter))
        medians = {name: statistics.median(values) for name, values in seconds.items()}
        print(
            f"{db.engine}: a call with a literal {medians['literal']:.0f} µs, with a parameter"
            f" {medians['parameter']:.0f} µs; parameter ÷ literal"
            f" {medians['parameter'] / medians['literal']:.2f}"
            f" (medians of {args.rounds} rounds of {args.calls:,} calls)"
        )
    finally:
        db.update_ddl([f"DROP TABLE {table}"])
        db.close()


if __name__ == "__main__":
    main()
