"""quarantine recorded with each result and run

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 10:50:00

Results stored while their test was quarantined are marked, and runs count their quarantined
failures, so a run that "passed" thanks to the quarantine says so. Existing results are marked
from the quarantine as it stands (results since each test's quarantine began).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("quarantined", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("quarantined_failures", sa.Integer(), nullable=False, server_default="0")
        )
    op.execute(
        """UPDATE result SET quarantined = TRUE WHERE EXISTS (
             SELECT 1 FROM quarantine q JOIN run r ON r.id = result.run_id
             WHERE q.test_id = result.test_id AND r.started_at >= q.since)"""
    )
    op.execute(
        """UPDATE run SET quarantined_failures = (
             SELECT COUNT(*) FROM result WHERE result.run_id = run.id AND result.quarantined
             AND result.outcome IN ('failed', 'error', 'crashed', 'timeout', 'flaky'))"""
    )


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("quarantined_failures")
    with op.batch_alter_table("result", schema=None) as batch_op:
        batch_op.drop_column("quarantined")
