"""State that lives as long as the pytest process: what a polluter leaves behind."""

import os
from pathlib import Path

dirty = False
half = False
a = b = False


def count(name: str) -> int:
    """How many times this was called, across processes (a file under FIXTURE_STATE)."""
    path = Path(os.environ["FIXTURE_STATE"]) / f"{name}.count"
    n = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(n))
    return n
