"""A test that leaves a grandchild behind in a session of its own, with a cleared environment:
neither the process group, the parent-death signal nor the inherited environment finds it."""

import os
import subprocess
import sys
import time
from pathlib import Path


def test_escape():
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        start_new_session=True,
        env={},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    Path(os.environ["FIXTURE_STATE"], "escapee.pid").write_text(str(child.pid))


def test_hang():
    if os.environ.get("ESCAPE_HANG"):
        time.sleep(600)  # holds the run open while the tracker is killed
