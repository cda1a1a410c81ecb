"""Engine, SQLite pragmas and migrations.

Migrations run in one explicit step, `migrate`, at the start of each command and of the web app
(`tracker db upgrade` does only that); `get_engine` never migrates, so no page's first query
changes the schema under the pages already answering.

WAL lets the dashboard read while a run writes; busy_timeout makes a second writer wait instead of
failing; foreign keys are off by default in SQLite and the schema relies on them.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from sqlalchemy import Engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, SQLModel, create_engine

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


# Every request and the scheduler's threads may hold a connection at once: the pool must be at
# least as large as the server's worker threads (40), or requests wait and then fail.
POOL = {"pool_size": 20, "max_overflow": 30, "pool_timeout": 60}


def sqlite_path(url: str) -> Path | None:
    if not url.startswith("sqlite") or url in ("sqlite://", "sqlite:///:memory:"):
        return None
    return Path(url.split("///", 1)[1]).expanduser()


@cache
def get_engine(url: str) -> Engine:
    """One engine per URL and process."""
    is_sqlite = url.startswith("sqlite")
    path = sqlite_path(url)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"timeout": 30} if is_sqlite else {},
        **(POOL if path or not is_sqlite else {}),
    )
    if is_sqlite:
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


HEAD = "0011"  # the newest migration's revision (test_store checks it against Alembic's)


def migrate(url: str) -> Engine:
    """Create or upgrade the database at `url` to the newest schema; its engine."""
    engine = get_engine(url)
    if not at_head(engine):
        upgrade(engine)
    return engine


def at_head(engine: Engine) -> bool:
    """Whether the database already has the newest schema, read without Alembic: importing it
    took 0.24 s of every command's start, `tracker run` included (bench/README.md)."""
    try:
        with engine.connect() as conn:
            version = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # a new database: no table yet
        return False
    return version == [(HEAD,)]


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """Commands started together on a fresh database must not both create the tables: the
    first migrates, the others wait and find it done. SQLite: an flock on the database's folder
    (never on the database file: closing any descriptor of that file would drop the locks SQLite
    holds on it in this process); PostgreSQL: an advisory lock."""
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is not None:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(7262910)"))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(7262910)"))
    else:
        yield


def upgrade(engine: Engine) -> None:
    # every command upgrades at its start: Alembic's INFO lines ("setup plugin ...", "Context
    # impl ...") say nothing a person needs
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    with _migration_lock(engine), engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    with Session(get_engine(url), expire_on_commit=False) as session:
        yield session


def upsert(session: Session, model: type[SQLModel]):
    """An INSERT that takes ON CONFLICT clauses, in the database's own dialect."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(model)
