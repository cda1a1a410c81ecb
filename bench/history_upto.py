"""A device night's history cut back to its first runs: the database a device call plans with,
from a kept one (bench/data/*.db.xz), so that a change is measured on the same history as the
night it is compared with (call AT planned from runs 1-8 of h200-nights-AE-AO.db.xz, as AQ had).

    python bench/history_upto.py bench/data/h200-nights-AE-AO.db.xz .device/hist/h200.db --runs 8

Every row of a later run goes, with what hangs from it (alerts' deliveries); the rest is kept
as it was. The source may be xz-compressed.
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
from pathlib import Path


def cut(db: Path, runs: int) -> int:
    """Delete every run after the first `runs` and its rows; how many runs are left."""
    con = sqlite3.connect(db)
    try:
        tables = [t for (t,) in con.execute("select name from sqlite_master where type='table'")]
        with con:
            if "alert_delivery" in tables:
                con.execute(
                    "delete from alert_delivery where alert_id in "
                    "(select id from alert where run_id > ?)",
                    (runs,),
                )
            for table in tables:
                columns = {row[1] for row in con.execute(f'pragma table_info("{table}")')}
                if "run_id" in columns:
                    con.execute(f'delete from "{table}" where run_id > ?', (runs,))
            con.execute("delete from run where id > ?", (runs,))
        con.execute("vacuum")
        problems = con.execute("pragma foreign_key_check").fetchall()
        if problems:
            raise SystemExit(f"rows left pointing at deleted ones: {problems[:5]}")
        return con.execute("select count(*) from run").fetchone()[0]
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a tracker database, .xz or not")
    parser.add_argument("target", type=Path)
    parser.add_argument("--runs", type=int, required=True, help="keep runs 1..RUNS")
    args = parser.parse_args()
    args.target.parent.mkdir(parents=True, exist_ok=True)
    opener = lzma.open if args.source.suffix == ".xz" else open
    with opener(args.source, "rb") as src, open(args.target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    print(f"{args.target}: {cut(args.target, args.runs)} runs")


if __name__ == "__main__":
    main()
