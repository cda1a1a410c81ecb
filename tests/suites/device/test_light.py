import os
import time
from pathlib import Path

import pytest


@pytest.mark.parametrize("i", range(int(os.environ.get("LIGHT_N", "20"))))
def test_light(i):
    if cache := os.environ.get("TRITON_CACHE_DIR"):  # what a compiled kernel leaves behind
        (Path(cache) / f"kernel-{i}").write_text("compiled")
        # what an autotuned kernel would do with it: keep its choice there, or tune afresh
        (Path(cache) / "autotuning").write_text(os.environ.get("TRITON_CACHE_AUTOTUNING", ""))
    time.sleep(float(os.environ.get("LIGHT_S", "0.01")))
