"""Engine, SQLite pragmas and migrations.

WAL lets the dashboard read while a run writes; busy_timeout makes a second writer wait instead of
failing; foreign keys are off by default in SQLite and the schema relies on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from sqlalchemy import Engine, event
from sqlmodel import Session, create_engine

PACKAGE_DIR = Path(__file__).parent


def migrations_dir() -> Path:
    """A wheel ships them as tracker/_migrations; a checkout has them at the top."""
    bundled = PACKAGE_DIR / "_migrations"
    return bundled if bundled.is_dir() else PACKAGE_DIR.parent / "migrations"


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


@cache
def get_engine(url: str) -> Engine:
    """One engine per URL and process, migrated to the newest schema on first use."""
    is_sqlite = url.startswith("sqlite")
    if is_sqlite and url not in ("sqlite://", "sqlite:///:memory:"):
        Path(url.split("///", 1)[1]).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": 30} if is_sqlite else {})
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    upgrade(engine)
    return engine


def upgrade(engine: Engine) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    with Session(get_engine(url), expire_on_commit=False) as session:
        yield session
