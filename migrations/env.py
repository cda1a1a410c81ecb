"""Alembic environment: uses the caller's connection (the tracker) or the ini's URL (developers)."""

from alembic import context
from sqlalchemy import engine_from_config, pool
from sqlmodel import SQLModel

import tracker.models  # noqa: F401  (registers the tables)

config = context.config
target_metadata = SQLModel.metadata


def run_migrations(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run_migrations(connection)
else:
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}), poolclass=pool.NullPool
    )
    with engine.connect() as conn:
        run_migrations(conn)
