"""alerts: what changed after each run or missed night, its deliveries, and filed issues

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 09:00:00

`alert` holds the events worked out once per stored run (or missed night), by a unique key;
`alert_delivery` is its outbox, one row per configured destination, tried again after a backoff
until the destination takes it; `issue_link` records the issues `tracker report --file-issue`
opened upstream.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIME = sqlmodel.sql.sqltypes.UTCDateTime


def upgrade() -> None:
    op.create_table(
        "alert",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.AutoString(length=600), nullable=False),
        sa.Column("suite", sqlmodel.AutoString(length=200), nullable=False),
        sa.Column("runner", sqlmodel.AutoString(length=200), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", TIME(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["run.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    op.create_index("ix_alert_run_id", "alert", ["run_id"])
    op.create_table(
        "alert_delivery",
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("destination", sqlmodel.AutoString(length=100), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("next_try_at", TIME(), nullable=False),
        sa.Column("last_error", sqlmodel.AutoString(length=500), nullable=True),
        sa.Column("sent_at", TIME(), nullable=True),
        sa.ForeignKeyConstraint(["alert_id"], ["alert.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("alert_id", "destination"),
    )
    op.create_table(
        "issue_link",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("suite", sqlmodel.AutoString(length=200), nullable=False),
        sa.Column("subject", sqlmodel.AutoString(length=1100), nullable=False),
        sa.Column("url", sqlmodel.AutoString(length=500), nullable=False),
        sa.Column("created_at", TIME(), nullable=False),
        sa.Column("commented_at", TIME(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("issue_link")
    op.drop_table("alert_delivery")
    op.drop_index("ix_alert_run_id", table_name="alert")
    op.drop_table("alert")
