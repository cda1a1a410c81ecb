"""a heartbeat for each running run

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 11:00:00

The tracker that runs a suite writes `heartbeat_at` every few seconds. A tracker on another host
cannot see whether the owner's pid lives, but it can see the heartbeat lapse, and close the run.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("run", sa.Column("heartbeat_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("heartbeat_at")
