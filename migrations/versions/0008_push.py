"""push: runs from runners' stores on a central server, and each store's outbox

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 15:30:00

Each database gets an id of its own (`store_meta.store_id`). A run pushed from it is stored
centrally with that id and its local run id (`run.origin`, `run.origin_run`), unique together: a
push that is retried after a lost answer stores nothing twice.

A `run now` request records the scheduler process that took it (`claimed_by`, `claimed_at`), so
that recovery can end one whose scheduler died; and there is at most one open (queued or started)
request per suite and runner, where two web workers could each add one before.

Also: 0006 made `run.heartbeat_at` a timestamp without time zone; on PostgreSQL it is now one with,
as every other time column (SQLite stores both alike).
"""

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("origin", sqlmodel.AutoString(length=64), nullable=True))
        batch_op.add_column(sa.Column("origin_run", sa.Integer(), nullable=True))
        batch_op.create_index("ux_run_origin", ["origin", "origin_run"], unique=True)
        if op.get_bind().dialect.name == "postgresql":
            batch_op.alter_column(
                "heartbeat_at",
                type_=sqlmodel.sql.sqltypes.UTCDateTime(),
                existing_type=sa.DateTime(),
                existing_nullable=True,
            )
    with op.batch_alter_table("run_request", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_by", sqlmodel.AutoString(length=200), nullable=True))
        batch_op.add_column(
            sa.Column("claimed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True)
        )
    op.execute(  # the newest open request of each suite and runner stays open
        "UPDATE run_request SET state = 'done' WHERE state IN ('queued', 'started') AND id NOT IN "
        "(SELECT MAX(id) FROM run_request WHERE state IN ('queued', 'started') "
        "GROUP BY suite, runner)"
    )
    op.create_index(
        "ux_request_one_open",
        "run_request",
        ["suite", "runner"],
        unique=True,
        sqlite_where=sa.text("state IN ('queued', 'started')"),
        postgresql_where=sa.text("state IN ('queued', 'started')"),
    )
    meta = op.create_table(
        "store_meta",
        sa.Column("key", sqlmodel.AutoString(length=50), nullable=False),
        sa.Column("value", sqlmodel.AutoString(length=200), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.bulk_insert(meta, [{"key": "store_id", "value": str(uuid.uuid4())}])
    op.create_table(
        "outbox",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("queued_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("next_try_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("last_error", sqlmodel.AutoString(length=500), nullable=True),
        sa.Column("pushed_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=True),
        sa.Column("remote_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id"),
    )


def downgrade() -> None:
    op.drop_table("outbox")
    op.drop_table("store_meta")
    op.drop_index("ux_request_one_open", table_name="run_request")
    with op.batch_alter_table("run_request", schema=None) as batch_op:
        batch_op.drop_column("claimed_at")
        batch_op.drop_column("claimed_by")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index("ux_run_origin")
        batch_op.drop_column("origin_run")
        batch_op.drop_column("origin")
