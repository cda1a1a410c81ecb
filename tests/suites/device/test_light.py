import os
import time
from pathlib import Path

import pytest


@pytest.mark.parametrize("i", range(20))
def test_light(i):
    if cache := os.environ.get("TRITON_CACHE_DIR"):  # what a compiled kernel leaves behind
        (Path(cache) / f"kernel-{i}").write_text("compiled")
    time.sleep(0.01)
