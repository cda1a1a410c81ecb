"""kernel cache: whether a run started with a warm compiled-kernel cache

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-30 22:30:00

Triton compiles every kernel on first use; with its cache kept between nights a run takes about a
third of the time of one that compiles everything. `run.kernel_cache` says which kind of night
it was ("warm", "cold"; null where nobody knows, as for ingested runs), so that a cold night is
not read as a slowdown and the plan learns durations from warm ones.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kernel_cache", sqlmodel.AutoString(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_column("kernel_cache")
