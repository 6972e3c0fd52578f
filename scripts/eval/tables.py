"""The evaluation's tables: every `sql/*.sql` query run by DuckDB over the exported runs.

    python tables.py --runs out/eval/runs --out out/eval/tables [--bucket 16] [--strict] [QUERY...]

Each query's `{runs}` is the runs directory (`profinfer export --parquet` tables,
`ground_truth/*.jsonl`, `cost_pairs.json`, `cost_windows.json`, and SQL scripts `*/*.sql`
of tables other programs wrote, loaded first) and `{bucket}` the context bucket of
`context_growth.sql`. Writes `<query>.md` (a Markdown table) and `<query>.json` (the
rows) per query, and `schema.md` (the run tables' columns); a query whose inputs are missing is skipped with a line saying so.
"""

import argparse
import decimal
import json
import math
import pathlib
import sys

import duckdb


def median_ci_ranks(con, max_n=200, level=0.95):
    """The table of 1-based ranks (lo, hi) of the distribution-free confidence interval of
    a median of n values: the widest symmetric order statistics whose coverage under
    Binomial(n, 1/2) reaches `level`, or none (n too small: 5 values cover 93.8 % at most)."""
    rows = []
    for n in range(1, max_n + 1):
        best = None
        for lo in range(n // 2, 0, -1):
            hi = n + 1 - lo
            cover = sum(math.comb(n, i) for i in range(lo, hi)) / 2**n
            if cover >= level:
                best = (lo, hi, cover)
                break
        if best:
            rows.append((n, *best))
    con.execute("CREATE TABLE median_ci_ranks (n INTEGER, lo INTEGER, hi INTEGER, coverage DOUBLE)")
    con.executemany("INSERT INTO median_ci_ranks VALUES (?, ?, ?, ?)", rows)


def plain(v):
    """DuckDB's DECIMAL results as floats, NaN as null (JSON has no NaN)."""
    if isinstance(v, decimal.Decimal):
        v = float(v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def cell(v):
    v = plain(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:g}" if abs(v) >= 1e5 or v == int(v) else f"{v}"
    return str(v).replace("|", "\\|")


def markdown(columns, rows):
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(cell(v) for v in r) + " |")
    return "\n".join(out) + "\n"


def schema(con, runs, out):
    """`schema.md`: every run table's columns and types, as DuckDB reads them."""
    parts = []
    for table in sorted(p.name for p in runs.iterdir() if p.is_dir() and any(p.glob("*.parquet"))):
        cols = con.execute(
            f"DESCRIBE SELECT * FROM read_parquet('{(runs / table).as_posix()}/*.parquet')"
        ).fetchall()
        parts.append(f"**{table}**: " + ", ".join(f"`{c[0]}` {c[1]}" for c in cols) + "\n")
    (out / "schema.md").write_text("\n".join(parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bucket", type=int, default=16)
    ap.add_argument(
        "--strict",
        action="store_true",
        help="a missing input or a query without rows is an error (the evaluation's own runs)",
    )
    ap.add_argument("queries", nargs="*")
    a = ap.parse_args()
    runs = pathlib.Path(a.runs).resolve()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sql_dir = pathlib.Path(__file__).parent / "sql"
    names = a.queries or sorted(p.stem for p in sql_dir.glob("*.sql"))
    con = duckdb.connect()
    median_ci_ranks(con)
    failed = False
    schema(con, runs, out)
    # Tables other programs wrote as SQL statements (llama.cpp's `test-backend-ops
    # --output sql`: CREATE TABLE and INSERTs), loaded before the queries.
    for script in sorted(runs.glob("*/*.sql")):
        con.execute(script.read_text())
        print(f"loaded {script.relative_to(runs)}", file=sys.stderr)
    for name in names:
        sql = (sql_dir / f"{name}.sql").read_text()
        sql = sql.replace("{runs}", runs.as_posix()).replace("{bucket}", str(a.bucket))
        try:
            cur = con.execute(sql)
        except duckdb.IOException as e:
            first = str(e).splitlines()[0]
            print(f"{name}: skipped, an input is missing ({first})", file=sys.stderr)
            failed = failed or a.strict
            continue
        except duckdb.Error as e:
            print(f"{name}: {e}", file=sys.stderr)
            failed = True
            continue
        columns = [d[0] for d in cur.description]
        rows = cur.fetchall()
        (out / f"{name}.md").write_text(markdown(columns, rows))
        (out / f"{name}.json").write_text(
            json.dumps([{c: plain(v) for c, v in zip(columns, r)} for r in rows], default=str, indent=1)
        )
        print(f"{name}: {len(rows)} rows", file=sys.stderr)
        if a.strict and not rows:
            print(f"{name}: no rows from the evaluation's own runs", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
