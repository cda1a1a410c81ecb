"""What code is being tested: a git checkout is fetched and moved to `ref` and its commit recorded;
a plain folder gets a content hash of its test files, so runs of unchanged code still compare as
the same input.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

HASHED_SUFFIXES = {".py", ".ini", ".cfg", ".toml", ".txt", ".json", ".yaml", ".yml"}
SKIPPED_DIRS = {".git", "__pycache__", ".pytest_cache", ".venv", "node_modules", ".tox"}


class CheckoutError(RuntimeError):
    pass


def _git(path: Path, *args: str, timeout: float = 300) -> str:
    proc = subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise CheckoutError(
            f"git {' '.join(args)} failed: {(proc.stderr or proc.stdout).strip()[:500]}"
        )
    return proc.stdout.strip()


def is_git_checkout(path: Path) -> bool:
    """Only the top of a work tree counts: a suite folder inside some other repository (the
    bundled example inside a clone of this project) must not move that repository."""
    try:
        top = _git(path, "rev-parse", "--show-toplevel", timeout=30)
    except (CheckoutError, FileNotFoundError):
        return False
    return Path(top).resolve() == path.resolve()


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in HASHED_SUFFIXES):
        rel = file.relative_to(path)
        if SKIPPED_DIRS.intersection(rel.parts):
            continue
        digest.update(rel.as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return f"content:{digest.hexdigest()[:16]}"


def checkout(path: Path, ref: str | None) -> str:
    """The commit (or content hash) under test, after moving a git checkout to `ref`."""
    if not is_git_checkout(path):
        return content_hash(path)
    if ref:
        if _git(path, "remote"):
            _git(path, "fetch", "--quiet", "--end-of-options", "origin", ref)
            _git(path, "checkout", "--quiet", "--detach", "FETCH_HEAD")
        else:
            commit = _git(path, "rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
            _git(path, "checkout", "--quiet", "--detach", commit)
    return _git(path, "rev-parse", "HEAD")
