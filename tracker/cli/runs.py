"""Commands that run, ingest and show runs."""

from __future__ import annotations

import bisect
import json
import shlex
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from tracker import alerts, queries, store
from tracker.cli.app import (
    EXIT_FAILED,
    EXIT_INFRA,
    JsonOpt,
    SuiteOpt,
    app,
    db_app,
    err,
    fail,
    out,
    prose,
    state,
    suite_name,
)
from tracker.config import ConfigError
from tracker.db import session_scope
from tracker.ingest import IngestError, load_run
from tracker.models import Outbox
from tracker.records import LONG, RUN_FLAKY, RUN_INFRA, RUN_PASSED, status_text
from tracker.words import counts_text, moment, plural, spoken


def _status_exit(status: str) -> int:
    if status in (RUN_PASSED, RUN_FLAKY):
        return 0
    return EXIT_INFRA if status == RUN_INFRA else EXIT_FAILED


def _print_run(detail: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(detail, ensure_ascii=False))
        return
    run = detail["run"]
    color = {"passed": "green", "flaky": "yellow"}.get(run["status"], "red")
    head = Text(f"run {run['id']}  ", style="bold")
    head.append(status_text(run["status"], run["quarantined_failures"]), style=f"bold {color}")
    head.append(f"  {run['suite']} on {run['runner']}  commit {run['commit'] or '-'}")
    head.append(f"  {run['duration'] or 0:.1f} s")
    if run.get("kernel_cache"):
        head.append(f", {run['kernel_cache']} kernel cache")
        if (run.get("environment") or {}).get("autotuning") == "kept":
            head.append(", autotuning kept")
    prose(head)
    prose(counts_text(run["counts"]), 2)
    if run["message"]:
        prose(Text(run["message"][:2000], style="yellow"), 2)
    notable = [r for r in detail["results"] if r["outcome"] not in ("passed", "skipped", "xfailed")]
    for result in notable[:50]:
        line = Text(
            f"  {spoken(result['outcome']):<11} ",
            style="red" if result["outcome"] != "flaky" else "yellow",
        )
        line.append(result["nodeid"])
        if result["quarantined"]:
            line.append("  [quarantined]", style="yellow")
        out.print(line)  # the id whole, on a line of its own: it is what gets copied
        msg = next((a["message"] for a in result["attempts"] if a["message"]), None)
        if msg:  # the message under it, wrapped at words
            text = Text(msg.splitlines()[0][:300], style="dim")
            prose(text, 14)
    if len(notable) > 50:
        out.print(f"  … and {len(notable) - 50} more (tracker show {run['id']} --json)")
    if run.get("artifacts"):
        out.print(Text(f"  files: {run['artifacts']}", style="dim"))


@app.command()
def run(
    suite: Annotated[str, typer.Argument(help="A suite from the config (`example` without one).")],
    as_json: JsonOpt = False,
) -> None:
    """Run a configured suite now and store every result."""
    from tracker.recovery import recover
    from tracker.runner.progress import RichReporter
    from tracker.service import run_and_store

    settings = state.settings()
    try:
        suite_cfg = settings.suite(suite)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    url = settings.database_url
    recover(settings)
    try:
        with RichReporter(err) as reporter:
            saved = run_and_store(settings, suite_cfg, reporter)
    except store.Busy as exc:
        raise fail(f"{exc}; try again when it has finished") from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    with session_scope(url) as session:
        detail = queries.run_detail(session, saved.id)
        queued = session.get(Outbox, saved.id)
    _print_run(detail, as_json)
    if not as_json:
        err.print(Text(f"stored in {url}; see it with: tracker show {saved.id}", style="dim"))
        if queued and queued.pushed_at:
            err.print(Text(f"pushed to {settings.push.url} as run {queued.remote_id}", "dim"))
        elif queued:
            why = f"not pushed yet ({queued.last_error}); it stays queued and is tried again by "
            err.print(Text(why + "the scheduler, or now with: tracker push --pending", "yellow"))
    raise typer.Exit(_status_exit(saved.status))


@app.command()
def polluter(
    test: Annotated[str, typer.Argument(help="The order-dependent test's node id.")],
    suite: SuiteOpt = None,
    run_id: Annotated[
        int | None, typer.Option("--run", help="Replay this run's order (default: the latest).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the test that pollutes an order-dependent one.

    Replays the order of the process where it failed, in fresh pytest processes on this runner,
    and bisects the tests that ran before it (delta debugging); each probe is repeated up to
    `analysis.polluter_tries` times. The result is stored and shown on the test page."""
    from tracker.investigate import find_polluter

    settings = state.settings()
    name = suite_name(suite)
    try:
        found = find_polluter(settings, settings.suite(name), test, run_id)
    except (ConfigError, queries.NotFound, store.Busy) as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(found.as_dict(), ensure_ascii=False))
        return
    out.print(Text(f"{found.verdict}: ", style="bold").append(found.victim))
    for culprit in found.culprits:
        out.print(Text(f"  after {culprit}"))
    for line in found.evidence:
        out.print(Text(f"  {line}", style="dim"))
    if found.culprits:
        out.print(Text(f"  the fix: the state {' + '.join(found.culprits)} leaves behind"))
        out.print(Text(f"  meanwhile: --deselect {shlex.quote(found.victim)}"))
    out.print(Text(f"  {found.probes} pytest processes", style="dim"))


@app.command("bisect")
def bisect_command(
    test: Annotated[str, typer.Argument(help="The broken test's node id.")],
    suite: SuiteOpt = None,
    good: Annotated[
        str | None, typer.Option("--good", help="A good commit (default: the last good one).")
    ] = None,
    bad: Annotated[
        str | None, typer.Option("--bad", help="A bad commit (default: 'broken since').")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Find the commit that broke a test.

    Bisects from the last good commit to a bad one in a scratch git worktree of the suite's
    checkout, running the test alone `analysis.polluter_tries` times at each step; a skip, a
    collection error or a mixed result is reported as ambiguous, not guessed. Stored and shown
    on the test page."""
    from tracker.investigate import find_first_bad
    from tracker.runner.bisect import BisectError

    settings = state.settings()
    name = suite_name(suite)
    try:
        found = find_first_bad(settings, settings.suite(name), test, good, bad)
    except (ConfigError, BisectError, queries.NotFound, store.Busy) as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if as_json:
        print(json.dumps(found.as_dict(), ensure_ascii=False))
        return
    head = Text(f"{found.verdict}: ", style="bold")
    if found.first_bad:
        head.append(f"{found.first_bad} {found.subject}")
    out.print(head)
    for commit in found.candidates:
        out.print(Text(f"  maybe {commit}"))
    for step in found.steps:
        out.print(Text(f"  {step.commit[:12]} {step.verdict} ({', '.join(step.outcomes)})"))


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise fail(f"--started-at {value!r} is not an ISO-8601 time") from None
    if parsed.tzinfo is None:
        raise fail("--started-at needs a time zone offset, e.g. 2026-11-30T22:00:00+08:00")
    return parsed


@app.command()
def ingest(
    file: Annotated[
        Path, typer.Argument(help="reportlog JSONL (.gz ok), JUnit XML, or a zip of one")
    ],
    suite: Annotated[str, typer.Option("--suite", help="Suite name (created on first use).")],
    runner: Annotated[str, typer.Option("--runner", help="Runner name (created on first use).")],
    commit: Annotated[str | None, typer.Option("--commit", help="Commit tested.")] = None,
    started_at: Annotated[
        str | None,
        typer.Option("--started-at", help="ISO-8601 with offset; default: from the file."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Store a results file from elsewhere as a run.

    A reportlog or JUnit file, e.g. from the fork's GitHub Actions job."""
    settings = state.settings()
    try:
        record = load_run(
            file, suite=suite, runner=runner, commit=commit, started_at=_parse_time(started_at)
        )
    except IngestError as exc:
        raise fail(str(exc)) from None
    with session_scope(settings.database_url) as session:
        saved = store.save_run(session, record)
        detail = queries.run_detail(session, saved.id)
    alerts.after_run(settings, saved.id)
    _print_run(detail, as_json)


@app.command()
def runs(
    suite: Annotated[str | None, typer.Option("--suite")] = None,
    runner: Annotated[str | None, typer.Option("--runner")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10000)] = 30,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs, newest first.

    Any run whose tracker died is closed first, keeping what it recorded."""
    from tracker.recovery import recover

    settings = state.settings()
    recover(settings)
    with session_scope(settings.database_url) as session:
        rows = queries.list_runs(session, suite, runner, limit)
    if as_json:
        print(json.dumps({"runs": rows}, ensure_ascii=False))
        return
    # two lines a run, nothing cut at 80 columns: the dates, commits and statuses whole
    for r in rows:
        color = {"passed": "green", "flaky": "yellow"}.get(r["status"], "red")
        head = Text(f"#{r['id']:<5} {moment(r['started_at'], settings.timezone)}  ", "bold")
        head.append(status_text(r["status"], r["quarantined_failures"]), style=color)
        head.append(f"  {r['commit'] or '-'}", style="dim")
        out.print(head)
        counts = counts_text(r["counts"])
        prose(f"{r['suite']} on {r['runner']}: {plural(r['expected'], 'test')}; {counts}", 7)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="Run id, or `last`.")],
    as_json: JsonOpt = False,
) -> None:
    """One run with its results."""
    try:
        with session_scope(state.settings().database_url) as session:
            rid = queries.latest_run_id(session) if run_id == "last" else int(run_id)
            detail = queries.run_detail(session, rid)
    except ValueError:
        raise fail(f"run id must be a number or `last`, not {run_id!r}") from None
    except queries.NotFound as exc:
        raise fail(str(exc)) from None
    _print_run(detail, as_json)


@db_app.command("backup")
def db_backup(
    path: Annotated[Path, typer.Argument(help="Where to write the copy (a new SQLite file).")],
) -> None:
    """Copy the SQLite database safely.

    A consistent copy, taken while the service runs (SQLite's backup API)."""
    import sqlite3

    url = state.settings().database_url
    if not url.startswith("sqlite:///"):
        raise fail("backup is for SQLite databases; use your server's tools otherwise")
    if path.exists():
        raise fail(f"{path} exists; choose a new file")
    source = sqlite3.connect(url.removeprefix("sqlite:///"))
    target = sqlite3.connect(path)
    with target:
        source.backup(target)
    source.close()
    target.close()
    out.print(f"backed up {url} to {path}")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the database.

    To the newest schema; every command, and the web app, also does it at its start."""
    url = state.settings().database_url  # which migrates
    out.print(f"database at the newest schema: {url}")


@app.command("plan")
def plan_command(
    suite: Annotated[str, typer.Argument(help="A suite from the config.")],
    devices: Annotated[
        int | None,
        typer.Option(
            "--devices",
            min=1,
            help="Default: the configured devices, else those the last run found, else 1.",
        ),
    ] = None,
    cold: Annotated[
        bool | None,
        typer.Option(
            "--cold/--warm",
            help="Plan for a cold or a warm compiled-kernel cache. Default: the cache as it is.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The next run's plan: device sharing, order, predicted end.

    From the last run's tests and the runner's recent runs: each long test's time alone and
    whether it fills its device (its slowdown beside other long tests), the chain of filling
    tests each device runs one at a time, and the predicted end and tests done by each minute."""
    from tracker.runner import plan, share
    from tracker.runner.cache import cache_state, kernel_cache

    settings = state.settings()
    try:
        config = settings.suite(suite)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    runner = settings.runner.name
    with session_scope(settings.database_url) as session:
        last = queries.list_runs(session, suite, runner, 1)
        if not last:
            raise fail(f"no run of {suite} on {runner} stored yet: nothing to plan from")
        nodeids = [r["nodeid"] for r in queries.run_results(session, last[0]["id"])[0]]
        samples = queries.recent_attempts(session, suite, runner)
        found = (queries.run_info(session, last[0]["id"])["environment"] or {}).get("device_count")
    if cold is None:
        cache = cache_state(kernel_cache(settings, config))  # None: the suite compiles nothing
    else:
        cache = "cold" if cold else "warm"
    warm = cache != "cold"
    sharing = share.learn(samples, warm)
    expected = plan.estimates(nodeids, share.first_attempts(samples, warm), sharing, warm)
    configured = len(settings.runner.devices) if settings.runner.devices else None
    count = devices or configured or (found if isinstance(found, int) and found > 0 else 1)
    slots = {f"d{d}w{w}": str(d) for d in range(count) for w in range(config.workers_per_device)}
    in_turns = plan.in_turns(samples, warm)
    predicted = plan.simulate(nodeids, expected, slots, config.group, warm, in_turns)
    by_minute = {
        m: bisect.bisect_right(predicted.ends, 60 * m)
        for m in range(1, int(predicted.end // 60) + 2)
    }
    long = sorted(
        (n for n in nodeids if expected[n].seconds >= LONG),
        key=lambda n: -expected[n].seconds,
    )
    tests = [
        {
            "nodeid": n,
            "seconds": round(expected[n].seconds, 1),
            "cut": expected[n].cut,
            "sharing": sharing[n].kind if n in sharing else "unknown",
            "slowed": [sharing[n].slowed, sharing[n].busy] if n in sharing else None,
            "presumed": sharing[n].presumed if n in sharing else False,
            "untried": sharing[n].untried if n in sharing else False,
            "turns": sharing[n].turns if n in sharing else False,
        }
        for n in long
    ]
    unknown = sum(1 for e in expected.values() if not e.known)
    cut = sum(1 for n in nodeids if expected[n].cut)
    # long tests planned warm at a cold night's time: no warm night ran them
    coldly = {s.nodeid for s in samples if s.warm is False} - {s.nodeid for s in samples if s.warm}
    compiling = sum(1 for n in long if n in coldly) if warm else 0
    # and those whose warm times are partly compiling, or whose kernels the cache may lack
    gaps, cached = share.cache_gaps(samples)  # warm nights' attempts: never among `coldly`
    gapped = {n for _, n in gaps}
    timed_compiling = sum(1 for n in long if n in gapped) if warm else 0
    lacking = sum(1 for n in long if n not in cached) if warm and cached is not None else 0
    turns = sum(1 for t in tests if t["turns"])  # filling ones only (`Sharing.turns`)
    fills = [t for t in tests if t["sharing"] == "fills"]
    in_chains = sum(1 for t in fills if t["nodeid"] in predicted.chained)
    # the run's limit counts from the run's start, a few seconds before the first test
    by_limit = bisect.bisect_right(predicted.ends, config.run_timeout)
    if as_json:
        print(json.dumps({"suite": suite, "runner": runner, "slots": len(slots),
                          "kernel_cache": cache,
                          "predicted_end": round(predicted.end, 1),
                          "done_by_minute": by_minute, "done_by_limit": by_limit,
                          "long_tests": tests,
                          "filling_at_once": predicted.lanes,
                          "chained": in_chains,
                          "without_history": unknown, "cut_tests": cut,
                          "without_warm_time": compiling,
                          "timed_compiling": timed_compiling, "may_compile": lacking,
                          "alone_as_turns": turns}))  # fmt: skip
        return
    prose(
        f"{suite} on {runner}: {plural(len(nodeids), 'test')}, "
        f"{plural(count, 'device')} x {plural(config.workers_per_device, 'slot')}, "
        f"{cache or 'no'} kernel cache (estimates from such runs where there are any)",
    )
    prose(
        f"predicted: the last test ends {predicted.end:,.0f} s after the first starts (from each "
        "test's expected time, "
        + (
            "the tests that fill a device taking turns on it; on five real warm GPU nights "
            "the tests done by 1 min were 11-141 off the prediction, by each later minute at "
            "most 21: bench/README.md)"
            if in_turns
            else "without tests slowing each other; on real cold GPU nights a test's time was "
            "typically 1.3-3.5x off its expected one: bench/README.md)"
        )
        + (
            f"; cut on a recent night: {plural(cut, 'test')}, each expected to take the longer "
            "of its time before the cut and its function's finished cases' typical time, so the "
            "end may come later"
            if cut
            else ""
        )
        + (
            f"; {plural(compiling, 'long test')} with no warm night yet, expected at a cold "
            "night's time, compiling included, so the end may come sooner"
            if compiling
            else ""
        )
        + (
            f"; {plural(timed_compiling, 'long test')} timed on warm nights whose cache lacked "
            "their kernels (no night since it was last empty had finished them), compiling "
            "included, so the end may come sooner"
            if timed_compiling
            else ""
        )
        + (
            f"; {plural(lacking, 'long test')} may compile tonight: no night since the cache was "
            "last empty finished them"
            if lacking
            else ""
        )
        + (
            f"; {plural(turns, 'long test')} that fill their device never seen about alone, "
            "each expected at its time beside others / (1 + their number), as if they had taken "
            "turns (one H200's heavy tests do: such guesses were 0.6-1.3x their times alone, "
            "bench/README.md); if they share the device instead, the end may come later"
            if turns
            else ""
        ),
    )
    presumed = sum(1 for t in fills if t["presumed"])
    untried = sum(1 for t in fills if t["untried"])
    why = ": no warm night yet, and compiling beside others says nothing of sharing"
    prose(
        f"{plural(len(fills), 'long test')} fill their device ({presumed} presumed, for want of "
        f"evidence{why if share.blind(samples, warm) else ''}; {untried} untried: no warm night "
        "ran them with and without company), "
        + (
            f"{sum(t['seconds'] for t in fills):,.0f} s in all; "
            f"{in_chains:,} in the devices' chains, the others under the ranking floor "
            "(too short to move the night's end) go with the short tests; "
            "at once per device: one while "
            "short tests are left, then "
            + ", ".join(f"{d or 'all'}: {n}" for d, n in sorted(predicted.lanes.items()))
            + (
                " (an untried kernel's first case first, to compare it with its cases beside "
                "others; its others not while a case of it runs)"
                if untried
                else ""
            )
            + "; a slot with nothing else to do takes one beyond that"
            if warm
            else "by their attempts beside others; tonight's cache is cold: they mostly compile, "
            "on the CPU, which does not take turns, so they run in no chain, and a device starts "
            "long tests on half its slots at most while others wait"
        ),
    )
    prose(
        f"{plural(len(tests) - len(fills), 'other test')} of {LONG:g} s or more; "
        f"{plural(unknown, 'test')} without history",
    )
    if by_limit < len(nodeids):
        prose(
            f"the run's limit (run_timeout, {config.run_timeout:,g} s from its start, a few "
            f"seconds before its first test) cuts it: {by_limit:,} of "
            f"{plural(len(nodeids), 'test')} predicted done by then",
        )
    done = [f"{m} min: {by_minute[m]:,}" for m in _checkpoints(max(by_minute))]
    for i in range(0, len(done), 4):  # 4 fit 80 columns
        out.print(("tests done by " if i == 0 else "              ") + ", ".join(done[i : i + 4]))
    out.print("longest tests (expected s, sharing, slowed of attempts with company):")
    for t in tests[:20]:
        # presumed: no attempt with more company says either way, so no count to show
        sharing = "presumed" if t["presumed"] else t["sharing"]
        slowed = f"{t['slowed'][0]}/{t['slowed'][1]}" if t["slowed"] and not t["presumed"] else "-"
        out.print(Text(f"  {t['seconds']:>7.1f} s  {sharing:<8}  {slowed:>5}"))
        out.print(Text(f"    {t['nodeid']}"))


def _checkpoints(last: int) -> list[int]:
    """The minutes `tracker plan` prints: every one up to 10, then a widening few and the last.
    A one-slot plan of a cold night ran to 71 minutes, and printed every one (15 lines)."""
    if last <= 10:
        return list(range(1, last + 1))
    marks = [1, 2, 5, 10, 15, 20, 30, 45, 60, 90, *range(120, last, 60)]
    return [m for m in marks if m < last] + [last]


@app.command("push")
def push_command(
    run_ids: Annotated[
        list[int] | None, typer.Argument(help="Runs to send (again); none: list what waits.")
    ] = None,
    pending: Annotated[
        bool, typer.Option("--pending", help="Send every queued run now, backoff or not.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Send runs to the central tracker (`[push] url`).

    Each run is queued when it is stored and sent at once; one that could not be sent waits and
    is tried again with backoff by the scheduler, or now with --pending. The central server
    stores a run once, however often it is sent. Exit 1 if a run could not be sent."""
    from tracker import push

    settings = state.settings()
    if not settings.push.url:
        raise fail("no [push] url configured: where should the runs go?")
    with session_scope(settings.database_url) as session:
        if run_ids:
            missing = sorted(set(run_ids) - queries.existing_runs(session, run_ids))
            if missing:
                raise fail(f"no run with id {', '.join(map(str, missing))}")
            push.enqueue(session, run_ids)
    if not (run_ids or pending):
        with session_scope(settings.database_url) as session:
            rows = [
                {
                    "run_id": r.run_id,
                    "tries": r.tries,
                    "next_try_at": r.next_try_at.isoformat(),
                    "last_error": r.last_error,
                }
                for r in push.waiting(session)
            ]
        if as_json:
            print(json.dumps({"url": settings.push.url, "waiting": rows}))
            return
        out.print(f"{plural(len(rows), 'run')} waiting for {settings.push.url}")
        for row in rows:
            next_try = row["next_try_at"][:19].replace("T", " ")
            tried = plural(row["tries"], "time")
            out.print(f"  run {row['run_id']}: tried {tried}, next at {next_try}")
            if row["last_error"]:
                out.print(Text(f"    {row['last_error']}", style="dim"))
        return
    sent = push.send(settings)
    if as_json:
        print(json.dumps({"url": settings.push.url, "sent": [vars(s) for s in sent]}))
    elif not sent:
        out.print("nothing waiting")
    for s in [] if as_json else sent:
        if s.error:
            out.print(Text(f"run {s.run_id}: not sent, queued for later: {s.error}", style="red"))
        else:
            what = "stored" if s.created else "was already there"
            out.print(Text(f"run {s.run_id}: {what} as run {s.remote_id} on {settings.push.url}"))
    if any(s.error for s in sent):
        raise typer.Exit(EXIT_FAILED)
