"""polluter searches whose culprits failed to make the victim fail again are "not confirmed"

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 10:40:00

Before this, a search that ddmin led to a set which then passed every try (evidence
"fails after …: 0/N") was stored as "polluter(s)" with those tests as culprits, and the pages and
alerts blamed them. Such results keep their tests as `suspects` and lose the blame, as
`tracker.runner.polluter.search` now decides.
"""

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEVER_AGAIN = re.compile(r"^fails after .*: 0/\d+$")


def upgrade() -> None:
    table = sa.table(
        "investigation", sa.column("id"), sa.column("kind"), sa.column("verdict"),
        sa.column("details", sa.JSON),
    )  # fmt: skip
    bind = op.get_bind()
    for row_id, details in bind.execute(
        sa.select(table.c.id, table.c.details).where(table.c.kind == "polluter")
    ).all():
        details = dict(details or {})
        evidence = details.get("evidence") or []
        if not details.get("culprits") or not any(NEVER_AGAIN.match(e) for e in evidence):
            continue
        details["suspects"], details["culprits"] = details["culprits"], []
        details["verdict"] = "not confirmed"
        bind.execute(
            table.update()
            .where(table.c.id == row_id)
            .values(verdict="not confirmed", details=details)
        )


def downgrade() -> None:
    """The old verdicts were wrong; nothing to restore."""
