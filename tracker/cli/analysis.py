"""Commands that judge: flaky tests, failure clusters, the kernel table, the promotion verdict,
and the quarantine that feeds back into run statuses."""

from __future__ import annotations

import getpass
import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich import box
from rich.table import Column, Table
from rich.text import Text

from tracker import quarantine
from tracker.analysis.history import UnknownName
from tracker.analysis.kernels import ICONS, markdown
from tracker.analysis.report import Scope
from tracker.cli.app import (
    EXIT_NOT_MET,
    JsonOpt,
    SuiteOpt,
    app,
    err,
    fail,
    out,
    prose,
    state,
    suite_name,
)
from tracker.db import session_scope
from tracker.validate import escape_controls
from tracker.words import counts_text, percent, plural, spoken

quarantine_app = typer.Typer(
    help="Quarantined tests: they run, but do not fail runs.", no_args_is_help=True
)
app.add_typer(quarantine_app, name="quarantine")

RunnerOpt = Annotated[str | None, typer.Option("--runner", help="Only this runner.")]
DaysOpt = Annotated[
    int | None,
    typer.Option("--days", min=1, max=365, help="Window in days (default: from config)."),
]


class FlakyFormat(StrEnum):
    table = "table"
    json = "json"
    deselect = "deselect"


class KernelFormat(StrEnum):
    table = "table"
    json = "json"
    markdown = "markdown"


@contextmanager
def scope(suite: str, runner: str | None = None, days: int | None = None) -> Iterator[Scope]:
    settings = state.settings()
    with session_scope(settings.database_url) as session:
        try:
            yield Scope(session, settings, suite, runner, days)
        except UnknownName as exc:
            raise fail(str(exc)) from None


def _pct(x: float | None) -> str:
    return "–" if x is None else percent(x)


def _dump(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, default=str))


@app.command()
def flaky(
    suite: SuiteOpt = None,
    runner: RunnerOpt = None,
    days: DaysOpt = None,
    fmt: Annotated[FlakyFormat, typer.Option("--format")] = FlakyFormat.table,
    as_json: JsonOpt = False,
) -> None:
    """Flaky and broken tests, with evidence.

    Ranked by the Wilson lower bound of the failure rate; also the broken ones (failing since
    a commit). `--format deselect` prints the quarantine as pytest options."""
    suite = suite_name(suite)
    if fmt == FlakyFormat.deselect:
        with session_scope(state.settings().database_url) as session:
            for line in quarantine.deselect_lines(quarantine.active(session, suite)):
                print(line)
        return
    with scope(suite, runner, days) as s:
        found = s.flaky_json()
        if as_json or fmt == FlakyFormat.json:
            _dump(found)
            return
        ranked, broken = s.flaky(), s.broken()
    searched = {x["nodeid"]: x for x in [*found["flaky"], *found["broken"]]}
    # a test id is never cut: it gets its own line, its numbers the line below
    out.print(Text(f"Flaky in {suite}, last {s.days} days: {plural(len(ranked), 'test')}", "bold"))
    for i, x in enumerate(ranked, 1):
        lo, hi = x.failure_interval
        notes = [
            n
            for n, on in (("quarantined", x.quarantined), ("order-dependent", x.order_dependent))
            if on
        ]
        out.print(Text(f"{i:>3}. ").append(x.nodeid, style="bold"))
        prose(
            f"first attempt failed in {x.failures} of {plural(x.runs, 'run')}, "
            f"rate {_pct(x.failure_rate)} "
            f"[{_pct(lo)}, {_pct(hi)}], flips {x.flip_rate:.0%}; "
            f"evidence: {spoken(', '.join(sorted(x.evidence)))}"
            + (f"; {', '.join(notes)}" if notes else ""),
            5,
        )
        if polluter := searched[x.nodeid].get("polluter"):
            after = " + ".join(polluter["culprits"])
            out.print(
                Text(
                    f"     polluter search: {polluter['verdict']}"
                    + (f", after {after}" if after else "")
                )
            )
    if broken:
        out.print(Text(f"Broken in {suite}: {plural(len(broken), 'test')}", "bold"))
    for x in broken:
        out.print(Text(f"  {x.nodeid}", style="bold"))
        out.print(Text(f"     {x.since()}"))
        if first := searched[x.nodeid].get("bisect"):
            out.print(
                Text(
                    f"     {first['verdict']}: {first['first_bad'] or ''} {first['subject'] or ''}"
                )
            )


@app.command()
def kernels(
    suite: SuiteOpt = None,
    runner: RunnerOpt = None,
    days: DaysOpt = None,
    fmt: Annotated[KernelFormat, typer.Option("--format")] = KernelFormat.table,
    as_json: JsonOpt = False,
) -> None:
    """The kernel table: one row per test file.

    Status, tests, pass rate, flaky and failing tests of each kernel."""
    suite = suite_name(suite)
    with scope(suite, runner, days) as s:
        rows = s.kernels()
    if fmt == KernelFormat.markdown:
        public = state.settings().public_url
        link = f"{public.rstrip('/')}/suites/{quote(suite, safe='')}" if public else None
        print(markdown(rows, s.days, link))
    elif as_json or fmt == KernelFormat.json:
        _dump(s.kernels_json())
    else:
        # names whole, never cut or folded: fewer borders leave them the room at 80 columns
        width = max((len(r.kernel) for r in rows), default=6)
        kernel = Column("kernel", no_wrap=True, min_width=width)
        # counts named as on the page; a header may take two lines at 80 columns
        heads = ("tests", "pass rate", "flaky tests", "failing tests")
        numbers = [Column(h, justify="right") for h in heads]
        table = Table(
            kernel, Column("status", no_wrap=True), *numbers,
            box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
            title=f"kernels of {suite}, last {s.days} days",
        )  # fmt: skip
        for r in rows:
            d = r.as_dict()
            table.add_row(
                r.kernel,
                f"{ICONS[r.status]} {r.status}",
                str(r.tests),
                _pct(d["pass_rate"]),
                str(len(r.flaky)),
                str(len(r.failing)),
            )
        out.print(table)


@app.command()
def clusters(
    suite: SuiteOpt = None,
    runner: RunnerOpt = None,
    days: DaysOpt = None,
    as_json: JsonOpt = False,
    top: Annotated[int, typer.Option("--top", min=1)] = 20,
) -> None:
    """Failures grouped by cause, biggest first.

    The cause is the error message with numbers, paths and addresses masked."""
    suite = suite_name(suite)
    with scope(suite, runner, days) as s:
        if as_json:
            _dump(s.clusters_json(top))
            return
        found = s.clusters()[:top]
    for c in found:
        flags = " ".join(
            f
            for f, on in (
                ("DEVICE-FATAL", c.device_fatal),
                (f"CASCADE in run {', '.join(map(str, c.cascade_runs))}", c.cascade_runs),
            )
            if on
        )
        sizes = f"{plural(c.size, 'failure')} in {plural(len(c.tests), 'test')}, "
        out.print(
            Text(sizes + plural(len(c.runs), "run"), style="bold").append(f"  {flags}", "red")
        )
        out.print(Text(f"     {c.signature}"))


def _met(met: bool, yes: str = "met", no: str = "not met") -> tuple[str, str]:
    return (yes, "bold green") if met else (no, "bold red")


@app.command()
def promotion(suite: SuiteOpt = None, runner: RunnerOpt = None, as_json: JsonOpt = False) -> None:
    """Is the promotion criterion met?

    Exit 0 when met, 3 when not (for workflow gates)."""
    suite = suite_name(suite)
    with scope(suite, runner) as s:
        v = s.promotion()
        per_runner = s.runner_promotions()
    if as_json:
        runners = {name: r.summary() for name, r in per_runner.items()}
        _dump({"suite": suite, "runner": runner, **v.as_dict(), "runners": runners})
    else:
        head = Text(*_met(v.met, "MET", "NOT MET"))
        out.print(head.append(f"  {suite}" + (f" on {runner}" if runner else ""), style=""))
        prose(v.headline(), 2)
        for p in v.parts():
            mark = "✓" if p["ok"] else "✗"
            measured = v.shown(p) or "no runs"
            if p.get("rate") and v.total:
                measured += f" ({v.successes} of {plural(v.total, 'run')})"
            out.print(Text(f"  {mark} {p['name']}: {measured} (need {p['required']})"))
        lo, hi = v.interval
        counts = counts_text(v.counts)
        out.print(Text(f"  runs: {counts or 'none'}"))
        prose(
            f"success {v.successes} of {plural(v.total, 'run')}, 95% interval "
            f"[{_pct(lo)}, {_pct(hi)}], P(rate >= {v.config.min_success_rate:.0%}) = "
            f"{v.confidence:.2f}",
            2,
        )
        for note in v.notes:
            prose(Text(note, style="dim"), 2)
        if len(per_runner) > 1:
            out.print(Text("  per runner:"))
            for name, r in per_runner.items():
                out.print(Text(f"    {name}: ").append(*_met(r.met)).append(f", {r.standing()}"))
    if not v.met:
        raise typer.Exit(EXIT_NOT_MET)


@quarantine_app.command("add")
def quarantine_add(
    nodeid: Annotated[str, typer.Argument(help="pytest node id")],
    reason: Annotated[str, typer.Option("--reason", help="Why, for whoever reads the list.")],
    suite: SuiteOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Who (default: your user name).")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Add an id this suite has never recorded.")
    ] = False,
) -> None:
    """Quarantine a test.

    It still runs and is recorded, but its failures no longer fail runs."""
    suite = suite_name(suite)
    with session_scope(state.settings().database_url) as session:
        try:
            quarantine.add(session, suite, nodeid, reason, by or getpass.getuser(), force)
        except quarantine.QuarantineError as exc:
            raise fail(str(exc)) from None
    out.print(Text(f"quarantined: {nodeid}"))


@quarantine_app.command("remove")
def quarantine_remove(
    nodeid: Annotated[str, typer.Argument(help="pytest node id")], suite: SuiteOpt = None
) -> None:
    """Release a test: its failures fail runs again."""
    suite = suite_name(suite)
    with session_scope(state.settings().database_url) as session:
        try:
            gone = quarantine.remove(session, suite, nodeid)
        except quarantine.QuarantineError as exc:
            raise fail(str(exc)) from None
    if not gone:
        raise fail(f"{nodeid} is not quarantined")
    out.print(Text(f"released: {nodeid}"))


@quarantine_app.command("list")
def quarantine_list(suite: SuiteOpt = None, as_json: JsonOpt = False) -> None:
    """The quarantined tests: since when, by whom, why."""
    suite = suite_name(suite)
    with session_scope(state.settings().database_url) as session:
        try:
            rows = quarantine.listing(session, suite)
        except quarantine.QuarantineError as exc:
            raise fail(str(exc)) from None
    if as_json:
        _dump({"suite": suite, "quarantined": rows})
        return
    if not rows:
        out.print(f"No test of {suite} is quarantined.")
    for r in rows:
        out.print(Text(f"{r['nodeid']}  since {r['since'][:10]} by {r['by']}: {r['reason']}"))


@quarantine_app.command("propose")
def quarantine_propose(
    suite: SuiteOpt = None, runner: RunnerOpt = None, as_json: JsonOpt = False
) -> None:
    """What the rule would quarantine.

    Flaky tests with enough evidence, as ready `quarantine add` commands; nothing is applied."""
    suite = suite_name(suite)
    minimum = state.settings().analysis.propose_min_flaky_runs
    with scope(suite, runner) as s:
        proposals = [
            x
            for x in s.flaky()
            if not x.quarantined and max(len(x.evidence.get("rerun", [])), x.failures) >= minimum
        ]
    if as_json:
        _dump({"suite": suite, "proposals": [x.as_dict() for x in proposals]})
        return
    if not proposals:  # on stderr: stdout stays a list of commands to paste
        err.print(f"Nothing to propose: no flaky test of {suite} with {minimum}+ failed runs.")
    for x in proposals:
        kinds = spoken(", ".join(sorted(x.evidence)))
        reason = f"first attempt failed in {x.failures} of {plural(x.runs, 'run')} ({kinds})"
        command = ["tracker", "quarantine", "add", "--suite", suite, escape_controls(x.nodeid)]
        # quoted for the shell it is pasted into, and never wrapped: half a command is worse
        print(shlex.join([*command, "--reason", reason, "--by", "rule:flaky"]))
