"""The compiled-kernel cache kept between nights: its state, what it keeps, its size cap."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from fastapi.testclient import TestClient
from helpers import SUITES

from tracker.analysis.changes import environment_diff, with_cache
from tracker.runner.cache import (
    NOTHING_COMPILED,
    cache_state,
    forget_tuning,
    note_compiled,
    prune,
    relocate,
    tuning,
)
from tracker.web.app import create_app


def test_a_suite_that_compiles_nothing_claims_no_kernel_cache(run_suite, settings):
    detail = run_suite("test_fast.py", suite="dispatch", suite_path=SUITES / "dispatch")
    assert detail["run"]["kernel_cache"] is None  # neither warm nor cold: nothing was compiled
    assert "autotuning" not in detail["run"]["environment"]  # no cache, no claim about it
    # marked, so the next night does not plan as a cold one (`Feed._crowded`)
    assert (settings.data_dir / "cache" / "dispatch" / NOTHING_COMPILED).exists()


def _plant_tuning(cache: Path) -> tuple[Path, Path]:
    """What an earlier night left: a tuning (Triton's layout) and a compiled kernel."""
    tuned = cache / "k1" / "_gemm_kernel.autotune.json"
    compiled = cache / "k2" / "_gemm_kernel.cubin"
    for path in (tuned, compiled):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
    return tuned, compiled


def test_a_nights_processes_share_its_tuning_and_each_night_tunes_anew(run_suite, settings):
    """By default the night's processes keep what they tune in the cache for one another, and an
    earlier night's tuning is gone before the first of them starts (`cache.tuning`)."""
    options = {"suite": "device", "suite_path": SUITES / "device", "reruns": 0}
    cache = settings.data_dir / "cache" / "device" / "triton"
    first = run_suite("test_light.py", **options)["run"]
    assert first["kernel_cache"] == "cold" and first["environment"]["autotuning"] == "per night"
    assert (cache / "autotuning").read_text() == "1"  # what the suite's processes were given
    tuned, compiled = _plant_tuning(cache)
    second = run_suite("test_light.py", **options)["run"]
    assert not tuned.exists() and not tuned.parent.exists() and compiled.exists()
    assert second["kernel_cache"] == "warm" and second["environment"]["autotuning"] == "per night"


def test_the_kernel_cache_keeps_tuning_between_nights_only_where_the_suite_asks(
    run_suite, settings
):
    """A kept tuning would fix each kernel's config across nights (`cache.tuning`)."""
    options = {"suite": "device", "suite_path": SUITES / "device", "reruns": 0}
    cache = settings.data_dir / "cache" / "device" / "triton"
    own = run_suite("test_light.py", **options, env={"TRITON_CACHE_AUTOTUNING": "0"})["run"]
    assert (cache / "autotuning").read_text() == "0" and "autotuning" not in own["environment"]
    tuned, _ = _plant_tuning(cache)
    kept = run_suite("test_light.py", **options, env={"TRITON_CACHE_AUTOTUNING": "1"})["run"]
    assert tuned.exists() and (cache / "autotuning").read_text() == "1"
    # the run says so, and what changed between the two nights names it: a night that skips
    # tuning is faster (call CE), and that is no speedup of the kernels
    assert kept["environment"]["autotuning"] == "kept"
    changed = environment_diff(with_cache(own), with_cache(kept))
    assert ("autotuning", None, "kept") in changed
    page = TestClient(create_app(settings)).get(f"/runs/{kept['id']}").text
    assert "autotuning: kept" in page and "autotuning: <code>–</code> → <code>kept</code>" in page


def test_tuning_is_kept_for_any_of_tritons_true_spellings(monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_AUTOTUNING", raising=False)
    spellings = ("1", "True", " on", "0", "")
    assert [tuning({"TRITON_CACHE_AUTOTUNING": v}) for v in spellings] == [
        "kept", "kept", "kept", "process", "process",
    ]  # fmt: skip
    assert tuning({}) == "night"
    monkeypatch.setenv("TRITON_CACHE_AUTOTUNING", "1")  # the runner's own environment
    assert tuning({}) == "kept" and tuning({"TRITON_CACHE_AUTOTUNING": "0"}) == "process"


def test_forgetting_tuning_leaves_compiled_kernels_and_what_it_does_not_know(tmp_path):
    tuned, compiled = _plant_tuning(tmp_path)
    beside = tuned.parent / "_gemm_kernel.json"  # a key's folder holding more than a tuning
    shared = tmp_path / "k3" / "other.autotune.json"
    shared.parent.mkdir()
    shared.write_text("{}")
    beside.write_text("{}")
    assert forget_tuning(tmp_path) == 2 and forget_tuning(None) == 0
    assert compiled.exists() and beside.exists() and not shared.parent.exists()


def test_a_cache_that_cannot_forget_its_tuning_still_runs_its_night(tmp_path, monkeypatch, caplog):
    tuned, _ = _plant_tuning(tmp_path)

    def read_only(self, missing_ok=False):
        raise PermissionError(13, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "unlink", read_only)
    assert forget_tuning(tmp_path) == 0 and tuned.exists()
    assert "cannot remove an earlier tuning" in caplog.text


def test_an_empty_cache_is_cold_unless_the_last_night_compiled_nothing(tmp_path):
    folder = tmp_path / "s" / "triton"
    folder.mkdir(parents=True)
    assert cache_state(folder) == "cold"
    assert note_compiled(folder, "cold") is None  # the night left it empty: a CPU suite
    assert cache_state(folder) is None  # the next night plans with no cache
    (folder / "kernel.cubin").write_text("x")  # the suite's new version compiles
    assert note_compiled(folder, None) == "cold"  # it started empty: a cold night after all
    assert cache_state(folder) == "warm" and not (folder.parent / NOTHING_COMPILED).exists()
    shutil.rmtree(folder)
    folder.mkdir()  # emptied (a fresh container): cold again
    assert cache_state(folder) == "cold"
    assert note_compiled(None, None) is None  # no cache kept


def _kernel(folder, name: str, size: int, days_ago: float) -> None:
    """A compiled kernel's entry as Triton writes one: a folder of files, last used days ago."""
    entry = folder / name
    entry.mkdir(parents=True)
    for part in ("k.cubin", "k.json"):
        (entry / part).write_bytes(b"x" * (size // 2))
        when = time.time() - days_ago * 86400
        os.utime(entry / part, (when, when))


def test_the_cache_drops_its_least_recently_used_kernels_to_fit_its_cap(tmp_path):
    folder = tmp_path / "triton"
    # made, and named, newest first: neither a folder's own time (its making) nor its name may pass
    # for its kernels' last use
    for name, days in (("k1-tonight", 0), ("k2-recent", 1), ("k3-older", 60), ("k4-old", 30)):
        _kernel(folder, name, 1000, days)
    (folder / "loose.bin").write_bytes(b"x" * 500)  # a file at the top, used just now
    outside = tmp_path / "elsewhere"
    _kernel(outside, "kept", 1000, 90)
    (folder / "link").symlink_to(outside / "kept")  # removed as a link, never followed
    os.utime(folder / "link", (0, 0), follow_symlinks=False)
    link = (folder / "link").lstat().st_size

    assert prune(folder, 10.0) == 0  # under the cap: nothing goes
    # 4,500 bytes and the link's for 2,600: the link and the two oldest go
    assert prune(folder, 2.6e-6) == 2000 + link
    assert sorted(p.name for p in folder.iterdir()) == ["k1-tonight", "k2-recent", "loose.bin"]
    assert (outside / "kept" / "k.cubin").exists()
    # a cap below what the last day used: that stays (the next night is warm, as recorded)
    assert prune(folder, 1e-9, night_start=time.time() - 86400) == 0
    assert prune(folder, 1e-9) == 2500 and not any(folder.iterdir())  # no such bound: all go
    assert prune(tmp_path / "missing", 1.0) == 0 and prune(None, 1.0) == 0


def test_a_night_prunes_its_kernel_cache_to_the_suites_cap(run_suite, settings):
    cache = settings.data_dir / "cache" / "device" / "triton"
    _kernel(cache, "last-version", 4000, 20)  # a kernel of the suite's version before
    options = {"suite": "device", "suite_path": SUITES / "device", "reruns": 0}
    detail = run_suite("test_light.py", **options, kernel_cache_gb=1e-9)  # below tonight's
    assert detail["run"]["kernel_cache"] == "warm"  # as the night found it
    # the old version's kernel is gone; tonight's 20 compiled kernels stay, over the cap, so the
    # next night starts as warm as it will be recorded
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        ["autotuning", *(f"kernel-{i}" for i in range(20))]
    )


def _triton_kernel(folder: Path, key: str) -> Path:
    """A compiled kernel as Triton 3 keeps one: its files, and a group file naming each by its
    absolute path (`FileCacheManager.put_group`)."""
    entry = folder / key
    entry.mkdir(parents=True)
    paths = {}
    for name in ("k.cubin", "k.json", "k.ptx"):
        (entry / name).write_text("x")
        paths[name] = str(entry / name)
    group = entry / "__grp__k.json"
    group.write_text(json.dumps({"child_paths": paths}))
    return group


def _hits(group: Path) -> bool:
    """Triton's cache hit (`FileCacheManager.get_group`, then `compile`): the metadata file is
    among the group's paths that exist."""
    paths = json.loads(group.read_text())["child_paths"]
    return os.path.exists(paths.get("k.json", ""))


def test_a_moved_cache_is_pointed_back_at_its_files(tmp_path):
    """A cache moved with its data_dir (or restored from a copy) looked warm and compiled every
    kernel again: Triton names a kernel's files by absolute path (calls BT-BV: a copy of the
    cache restored elsewhere)."""
    old = tmp_path / "old" / "triton"
    group = _triton_kernel(old, "KEY1")
    odd = {"relative": "k.cubin", "gone": str(old / "KEY2" / "missing.cubin")}
    (old / "KEY2").mkdir()
    (old / "KEY2" / "__grp__k.json").write_text(json.dumps({"child_paths": odd}))
    (old / "KEY3").mkdir()
    (old / "KEY3" / "__grp__k.json").write_text("{not json")
    (old / "KEY4").mkdir()
    (old / "KEY4" / "__grp__k.json").write_text(json.dumps({"child_paths": ["a list"]}))
    new = tmp_path / "new" / "triton"
    new.parent.mkdir()
    shutil.move(old, new)
    moved = new / "KEY1" / group.name
    assert cache_state(new) == "warm" and not _hits(moved)  # full, and every kernel a miss
    assert relocate(new) == 1 and _hits(moved)
    assert json.loads(moved.read_text())["child_paths"] == {
        name: str(new / "KEY1" / name) for name in ("k.cubin", "k.json", "k.ptx")
    }
    # what is not Triton's group as we know it, or names no file here, is left as it was
    assert json.loads((new / "KEY2" / "__grp__k.json").read_text())["child_paths"] == odd
    assert (new / "KEY3" / "__grp__k.json").read_text() == "{not json"
    assert relocate(new) == 0 and relocate(None) == 0  # in place: nothing to do
    assert sorted(p.name for p in (new / "KEY1").iterdir()) == [
        "__grp__k.json", "k.cubin", "k.json", "k.ptx"
    ]  # fmt: skip


def test_a_night_finds_its_moved_cache_whole(run_suite, settings, tmp_path):
    cache = settings.data_dir / "cache" / "device" / "triton"
    elsewhere = tmp_path / "before-the-move" / "triton"
    group = _triton_kernel(elsewhere, "KEY")
    shutil.copytree(elsewhere, cache)  # restored from a copy; the original then goes
    shutil.rmtree(elsewhere)
    options = {"suite": "device", "suite_path": SUITES / "device", "reruns": 0}
    detail = run_suite("test_light.py", **options)
    assert detail["run"]["kernel_cache"] == "warm"
    assert _hits(cache / "KEY" / group.name)  # and warm it was: Triton reads the kernel
