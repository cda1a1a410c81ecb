"""The suite's compiled-kernel cache (Triton's) kept between nights: where it is, whether a night
found it warm, and its size kept under the suite's cap."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path, PurePath

from tracker.config import Settings, SuiteConfig
from tracker.runner.process import suite_env

log = logging.getLogger(__name__)


def kernel_cache(settings: Settings, suite: SuiteConfig) -> Path | None:
    """Where the suite's compiled kernels stay between runs (Triton's cache); None when the
    suite keeps none, or sets TRITON_CACHE_DIR itself (its state is then unknown to us)."""
    if not suite.kernel_cache or "TRITON_CACHE_DIR" in suite.env:
        return None
    folder = (suite.cache_dir or settings.data_dir / "cache" / suite.name) / "triton"
    folder.mkdir(parents=True, exist_ok=True)
    return folder.resolve()


TRUE = {"1", "true", "yes", "on", "y"}  # Triton's reading of a true flag


def tuning(env: dict[str, str]) -> str:
    """How the suite's processes, with its `env` over the runner's (`process.suite_env`), share
    Triton's autotuning results in the kept cache: `kept` from night to night where
    TRITON_CACHE_AUTOTUNING is set true, `process` (each process tunes for itself, Triton's
    default) where it is set otherwise, else `night`: the night's processes share what any of
    them tuned, and each night tunes anew (`forget_tuning`).

    Not kept by default: a kept tuning fixes each autotuned kernel's config from night to night,
    where a CI run in a fresh container tunes again and may pick another (other block sizes,
    other rounding), so a config-dependent failure would hide. Not per process either: a process
    tunes each shape it meets, on the device, and a night's processes meet the same shapes. On
    one H200 each of Liger's fused_moe correctness cases that tuned took 191-249 s beside others
    (call BM; xdist's worker took 39 s for a case after another of the same shape, call BN),
    and alone, with the caches a first run had left, one took 4.8 s with the tuning kept and did
    not finish in 34.6 s without (call CE). Shared in the night, a warm night finished 2,606 of
    2,608 tests by 540 s, against 2,601-2,602 before, and every fused_moe case (calls CF, CG,
    bench/README.md)."""
    flag = suite_env(env).get("TRITON_CACHE_AUTOTUNING")
    if flag is None:
        return "night"
    return "kept" if flag.strip().lower() in TRUE else "process"


def forget_tuning(folder: Path | None) -> int:
    """Remove the autotuning results an earlier night left in the cache (Triton keeps each as
    `<key>/<kernel>.autotune.json`), so that this night tunes anew; how many. Compiled kernels
    stay: they are the same binary whichever night compiled them."""
    if folder is None:
        return 0
    gone = 0
    for path in folder.glob("*/*.autotune.json"):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:  # a read-only cache: the night reads the earlier tuning
            log.warning("kernel cache %s: cannot remove an earlier tuning: %s", folder, exc)
            return gone
        gone += 1
        with contextlib.suppress(OSError):  # the key's folder, where it held nothing else
            path.parent.rmdir()
    return gone


def relocate(folder: Path | None) -> int:
    """Point the cache's kernels back at their files in `folder`; how many kernels needed it.
    Triton names a compiled kernel's files by absolute path (`__grp__*.json`, `child_paths`) and
    reads a kernel from the cache only where those paths exist, so a cache moved with its
    data_dir, mounted elsewhere, or restored from a copy compiles every kernel again while the
    folder looks full: the night would be recorded warm and read as a slowdown. Only a path
    outside its kernel's folder whose file is in that folder here is changed; what Triton wrote
    otherwise (another layout of a later version) is left as it is."""
    if folder is None:
        return 0
    moved = 0
    for group in folder.glob("*/__grp__*.json"):
        try:
            paths = json.loads(group.read_text(encoding="utf-8"))["child_paths"]
            here = {
                child: str(group.parent / PurePath(path).name)
                for child, path in paths.items()
                if os.path.isabs(path)
                and PurePath(path).parent != group.parent
                and (group.parent / PurePath(path).name).exists()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not Triton's group file as we know it
        if not here:
            continue
        temp = group.with_name(f"{group.name}.{os.getpid()}.tmp")
        try:
            temp.write_text(json.dumps({"child_paths": {**paths, **here}}), encoding="utf-8")
            os.replace(temp, group)  # as Triton writes its own: never half a file
        except OSError as exc:  # a read-only cache: its kernels compile again, as before
            log.warning("kernel cache %s: cannot point %s at its files: %s", folder, group, exc)
            return moved
        moved += 1
    if moved:
        log.info("kernel cache %s: %d kernels' files were named in another folder", folder, moved)
    return moved


NOTHING_COMPILED = "compiled-nothing"  # beside a cache folder that a whole night left empty


def cache_state(folder: Path | None) -> str | None:
    """`warm` when the compiled-kernel cache holds something, `cold` when empty; None: no cache,
    or an empty one that the suite's last night left empty (a suite that compiles nothing: it
    would otherwise plan every night as cold, `Feed._crowded` included)."""
    if folder is None:
        return None
    if next(folder.iterdir(), None):
        return "warm"
    return None if (folder.parent / NOTHING_COMPILED).exists() else "cold"


def note_compiled(folder: Path | None, started: str | None) -> str | None:
    """After a night that ran its tests: the cache state it started with, as it turned out,
    and the mark of a suite that compiles nothing set or cleared for the next night."""
    if folder is None:
        return started
    mark = folder.parent / NOTHING_COMPILED
    if next(folder.iterdir(), None):
        mark.unlink(missing_ok=True)
        return started or "cold"  # it started empty (marked) and compiled: a cold night
    mark.touch()
    return None  # nothing was compiled: no cache to speak of (a CPU suite)


def _entry(path: Path) -> tuple[float, int]:
    """When an entry of the cache (a kernel's folder, or a file) was last used, and its bytes: its
    files' latest access or change. relatime, Linux's default, updates a file's access time at
    most once a day on reads, which is what a nightly cache needs."""
    if path.is_symlink() or not path.is_dir():
        st = path.lstat()
        return max(st.st_atime, st.st_mtime), st.st_size
    used, size = [], 0
    for root, _, files in os.walk(path):  # symlinks are not followed
        for name in files:
            st = os.lstat(os.path.join(root, name))
            used.append(max(st.st_atime, st.st_mtime))
            size += st.st_size
    return max(used, default=path.lstat().st_mtime), size  # the folder's own: when emptied


RELATIME = 86400  # seconds: a file read again within them may keep its older access time


def prune(folder: Path | None, limit_gb: float, night_start: float | None = None) -> int:
    """Remove the least recently used entries until the cache holds `limit_gb` at most, but none
    used in the day before `night_start` (epoch seconds) or since; the bytes removed. Triton
    names each compiled kernel by a hash of its source and options, so a changed kernel or a new
    version of the suite compiles anew, and the old entries are never read again: without a cap
    the folder grows by every version (Liger's test/transformers compiles 1.8 GB: bench/README.md,
    call BL). Run after a night, keeping what it used, as far as relatime's access times tell: a
    cap below one night's kernels would otherwise leave the next night partly cold while it is
    recorded warm. On a `noatime` mount an entry's last use is its last write."""
    if folder is None or not folder.is_dir():
        return 0
    keep_since = float("inf") if night_start is None else night_start - RELATIME
    entries = sorted((*_entry(p), p) for p in folder.iterdir())
    total, limit, freed = sum(size for _, size, _ in entries), int(limit_gb * 1e9), 0
    for used, size, path in entries:
        if total - freed <= limit or used >= keep_since:
            break
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        freed += size
    if freed:
        log.info("kernel cache %s: %d bytes of least recently used kernels removed", folder, freed)
    if total - freed > limit:
        log.warning(
            "kernel cache %s: %.1f GB with what the last night used, over kernel_cache_gb = %g",
            folder, (total - freed) / 1e9, limit_gb,
        )  # fmt: skip
    return freed
