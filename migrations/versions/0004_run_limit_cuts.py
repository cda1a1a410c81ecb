"""run-limit cuts are interrupted, not timeout

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 10:40:00

Earlier versions recorded the test that was running when the run's time limit hit as `timeout`,
a failure that made its kernel `failing`. The runner wrote a fixed message on those attempts;
they become `interrupted` (no evidence either way), their results too, and the runs' counts are
recounted.
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CUT = "the run's time limit was reached during this test%"


def upgrade() -> None:
    conn = op.get_bind()
    cut = conn.execute(
        sa.text(
            "SELECT run_id, test_id, number FROM attempt "
            "WHERE outcome = 'timeout' AND message LIKE :m"
        ),
        {"m": CUT},
    ).all()
    for run_id, test_id, number in cut:
        conn.execute(
            sa.text(
                "UPDATE attempt SET outcome = 'interrupted' "
                "WHERE run_id = :r AND test_id = :t AND number = :n"
            ),
            {"r": run_id, "t": test_id, "n": number},
        )
        if number == 1:
            conn.execute(
                sa.text(
                    "UPDATE result SET outcome = 'interrupted' "
                    "WHERE run_id = :r AND test_id = :t AND outcome = 'timeout'"
                ),
                {"r": run_id, "t": test_id},
            )
    for run_id in {r for r, _, _ in cut}:
        counts = dict(
            conn.execute(
                sa.text(
                    "SELECT outcome, COUNT(*) FROM result WHERE run_id = :r "
                    "GROUP BY outcome ORDER BY outcome"
                ),
                {"r": run_id},
            ).all()
        )
        conn.execute(
            sa.text("UPDATE run SET counts = :c WHERE id = :r"),
            {"c": json.dumps(counts), "r": run_id},
        )


def downgrade() -> None:
    pass  # the old reading was wrong; nothing to restore
