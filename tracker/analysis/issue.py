"""Issue-ready Markdown: what a maintainer pastes upstream about a test, a kernel or the
promotion verdict. It says what the tracker knows and how it knows it (nights, attempts, reruns
alone), what the failure looks like, where it ran, and the exact commands that reproduce it;
what is not known is said so, never left out. The test page's report link and `tracker report`
print the same text.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from typing import Any

from sqlmodel import Session

from tracker import queries
from tracker.analysis import history
from tracker.analysis.changes import ENVIRONMENT_KEYS, with_cache
from tracker.analysis.clusters import signature
from tracker.analysis.report import Scope
from tracker.analysis.testcase import test_data
from tracker.config import Settings
from tracker.words import moment, percent, plural, short_commit, spoken

MESSAGE_MAX = 600  # characters of the latest failure's message quoted
FRAMES_MAX = 8
# pytest's long traceback names each frame "path:line: in function" under its code, and the
# raising one "path:line: ExceptionName"; the suite's own files are relative to its rootdir
_FRAME = re.compile(r"^(?P<path>\S+\.py):(?P<line>\d+):(?: in (?P<func>\S+)| (?P<exc>\w+))?\s*$")


def _code(text: str) -> str:
    """Inline code that survives backticks in a test id."""
    text = text.replace("\n", " ")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _block(text: str) -> str:
    fence = "~~~~" if "```" in text else "```"
    return f"{fence}\n{text}\n{fence}"


def _pytest(settings: Settings, suite: str, *processes: list[str]) -> str:
    """Commands that run each list of nodeids in one process, in that order, as the runner
    does: the suite's interpreter and options (not its paths), from its folder."""
    config = next((s for s in settings.suites if s.name == suite), None)
    python = config.python if config else "python"
    extra = [a for a in (config.args if config else []) if not (config.path / a).exists()]
    command = [python, "-m", "pytest", "-p", "no:randomly", *extra]
    where = [f"cd {shlex.quote(str(config.path))}"] if config else []
    return "\n".join([*where, *(shlex.join([*command, *nodeids]) for nodeids in processes)])


def _environment(run: dict[str, Any] | None) -> str:
    """The facts a run's comparison reads (`changes.ENVIRONMENT_KEYS`), with its kernel cache:
    a cold night compiles every kernel."""
    env = with_cache(run) if run and run["environment"] else {}
    rows = [(k, env[k]) for k in ENVIRONMENT_KEYS if env.get(k) not in (None, "")]
    if not rows:
        return "Not probed in any failing run listed: the environment is unknown."
    return "\n".join(["| | |", "| --- | --- |", *(f"| {k} | {_cell(v)} |" for k, v in rows)])


def _frames(longrepr: str | None) -> list[str]:
    """Where a failure happened, for a reader of the suite's code: the frames in the suite's
    own files, outermost first, and the frame that raised (a library's, past site-packages/)."""
    frames = [m for m in map(_FRAME.match, (longrepr or "").splitlines()) if m]
    own = [m for m in frames if not m["path"].startswith("/") and "site-packages" not in m["path"]]

    def said(m: re.Match[str]) -> str:
        where = f"{m['path'].rpartition('site-packages/')[2]}:{m['line']}"
        return f"- {_code(where)}" + (f" in {_code(m['func'])}" if m["func"] else "")

    shown = [said(m) for m in own[:FRAMES_MAX]]
    if frames and frames[-1] not in own[:FRAMES_MAX]:
        shown.append(said(frames[-1]) + f" raised {_code(frames[-1]['exc'] or 'it')}")
    return shown


def test_report(session: Session, settings: Settings, test_id: int) -> str:
    found = test_data(session, settings, test_id)
    test, stats = found["test"], found["stats"]
    nodeid, suite = test["nodeid"], test["suite"]
    failures = found["failures"]
    verdict = stats.verdict if stats else "no data"
    out = [f"## {_code(nodeid)} is {spoken(verdict)} in {suite}", ""]
    if stats and stats.runs:
        lo, hi = found["interval"]
        held = " It is quarantined: its failures do not fail the nightly run."
        out += [
            f"**Verdict: {verdict}.** Its first attempt failed in "
            f"{stats.failures} of {plural(stats.runs, 'run')} in the last {found['days']} days "
            f"(pass rate {percent(stats.pass_rate, 0)}, 95% interval {lo:.0%}-{hi:.0%}). "
            f"Kernel: {_code(test['kernel'])}." + (held if stats.quarantined else ""),
            "",
        ]
    else:
        out += [f"**No runs of it in the last {found['days']} days:** no verdict.", ""]
    out += ["### Evidence", ""]
    attempts: dict[int, list[history.AttemptRow]] = {}
    for a in history.attempts_of(session, {(h["run_id"], test_id) for h in failures}):
        attempts.setdefault(a.run_id, []).append(a)
    if failures:
        out += [
            "| run | started | commit | runner | first attempt | in its process | rerun alone |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for h in failures:
            tries = attempts.get(h["run_id"], [])
            rerun = ", ".join(a.outcome for a in tries if a.isolated) or "not rerun"
            first = tries[0] if tries else None
            place = "–"
            if first is not None and first.position is not None:
                place = f"process {first.process}, test {first.position + 1}"
            at = moment(h["started_at"], settings.timezone)
            commit, runner = _cell(short_commit(h["commit"])), _cell(h["runner"])
            out.append(
                f"| #{h['run_id']} | {at} | {commit} | {runner} | {h['first']} | {place} | "
                f"{rerun} |"
            )
        firsts = Counter(h["first"] or "not run" for h in found["history"])
        said = ", ".join(f"{n} {spoken(k)}" for k, n in firsts.most_common())
        out += [
            "",
            f"Its first attempt in its last {plural(len(found['history']), 'run')}: {said}.",
            "",
        ]
    else:
        out += ["No failure stored.", ""]
    messages = [h["message"] for h in failures if h.get("message")]
    if messages:
        common = Counter(signature(m) for m in messages).most_common(1)[0]
        out += [
            "### Failure",
            "",
            f"Signature, in {common[1]} of {plural(len(messages), 'failure')} listed:",
            "",
            _block(common[0]),
            "",
            "The latest message:",
            "",
            _block(messages[0][:MESSAGE_MAX]),
            "",
        ]
        # the latest failure with a traceback to read: a JUnit file may carry none
        traces = (
            (h["run_id"], queries.failure_trace(session, h["run_id"], test_id)) for h in failures
        )
        run_id, frames = next(((r, f) for r, t in traces if (f := _frames(t))), (None, []))
        if frames:
            out += [
                f"Where, in run #{run_id}: the frames in the suite's own files, outermost "
                "first, then the one that raised:",
                "",
                *frames,
                "",
            ]
    out += _order(session, settings, found, attempts)
    out += ["### Environment", ""]
    # the latest failing run whose environment was probed: an ingested one may have none
    probed = (queries.run_info(session, h["run_id"]) for h in failures)
    run = next((r for r in probed if r["environment"]), None)
    if run and run["id"] != failures[0]["run_id"]:
        out += [f"Of run #{run['id']}, its latest failing run with a probed environment:", ""]
    out += [_environment(run), ""]
    alone = _block(_pytest(settings, suite, [nodeid]))
    out += ["### Reproduce", "", "Alone, in a fresh process:", "", alone, ""]
    return "\n".join(out)


def _order(
    session: Session,
    settings: Settings,
    found: dict[str, Any],
    attempts: dict[int, list[history.AttemptRow]],
) -> list[str]:
    """Order dependence: the polluter search's answer, else what ran before it in the latest
    failing process, with the commands that run them in that order in one process."""
    stats, polluter, bisect = found["stats"], found["polluter"], found["bisect"]
    nodeid, suite = found["test"]["nodeid"], found["test"]["suite"]
    out: list[str] = []
    if polluter and polluter.get("culprits"):
        culprits = polluter["culprits"]
        out += [
            "### Order dependence",
            "",
            f"A polluter search (run #{polluter['run_id']}'s process order, replayed in fresh "
            f"processes) found: **{polluter['verdict']}** "
            + ", ".join(_code(c) for c in culprits) + ".",
            "",
            *(f"- {e}" for e in polluter.get("evidence", [])),
            "",
            "In this order, in one process, it fails:",
            "",
            _block(_pytest(settings, suite, [*culprits, nodeid])),
            "",
        ]  # fmt: skip
    elif found["failures"]:
        latest = found["failures"][0]["run_id"]
        first = (attempts.get(latest) or [None])[0]
        before = []
        if first is not None and first.position is not None:
            before = history.ran_before(session, latest, first.process, first.position)
        confirmed = stats is not None and stats.order_dependent
        search = f"`tracker polluter {shlex.quote(nodeid)} --suite {shlex.quote(suite)}`"
        out += [
            "### Order",
            "",
            (
                "Each failure passed when rerun alone in a fresh process: something that ran "
                "before it in the same process makes it fail."
                if confirmed
                else "Not shown to depend on order: no failure of it passed a rerun alone."
            )
            + (
                f" A polluter search (run #{polluter['run_id']}'s process order, replayed in "
                f"{plural(polluter.get('probes', 0), 'fresh process')}) blamed no test: "
                f"**{polluter['verdict']}** ({'; '.join(polluter.get('evidence', []))})."
                if polluter
                else f" No polluter search is stored ({search} makes one)."
            ),
            "",
        ]
        if polluter and polluter.get("suspects"):
            out += [
                "The set the search ended at, which then passed every try (not blamed):",
                "",
                *(f"- {_code(n)}" for n in polluter["suspects"]),
                "",
            ]
        if before:
            nearest = before[:5]
            out += [
                f"In run #{latest} it was test {first.position + 1} of its pytest process; "
                f"the {plural(len(nearest), 'test')} right before it, nearest first:",
                "",
                *(f"- {_code(n)}" for n in nearest),
                "",
                f"The {plural(len(before), 'test')} before it in that process, then it, in that "
                "order, in one process:",
                "",
                _block(_pytest(settings, suite, [*reversed(before), nodeid])),
                "",
            ]
    if bisect and bisect.get("first_bad"):
        out += [f"First bad commit (bisect): `{bisect['first_bad']}`.", ""]
    elif stats and stats.broken_since:
        out += [
            f"Broken since commit `{stats.broken_since}` (last good `{stats.last_good}`); "
            "not bisected yet.",
            "",
        ]
    elif stats and stats.broken_run:
        out += [
            f"Broken since run #{stats.broken_run}, with no commit change recorded since the "
            f"last good run #{stats.good_run}: no commit is to blame (compare the "
            "two runs' environments); there is no commit to bisect.",
            "",
        ]
    return out


def kernel_report(session: Session, settings: Settings, suite: str, kernel: str) -> str:
    scope = Scope(session, settings, suite)
    row = next((k for k in scope.kernels() if k.kernel == kernel), None)
    if row is None:
        raise queries.NotFound(f"no kernel {kernel!r} in {suite} in the last {scope.days} days")
    out = [
        f"## Kernel {_code(kernel)} is {spoken(row.status)} in {suite}",
        "",
        f"{plural(row.tests, 'test')}; their first attempts passed {row.runs - row.failures} "
        f"of {row.runs} times in the last {scope.days} days (skips not counted).",
        "",
    ]
    for title, names in (("Failing", row.failing), ("Flaky", row.flaky)):
        if names:
            out += [f"### {title}", "", *(f"- {_code(n)}" for n in names[:50]), ""]
    if row.failing or row.flaky:
        shown = [*row.failing, *row.flaky][:10]
        out += [
            f"The first {plural(len(shown), 'test')} above, each alone in a fresh process:",
            "",
            _block(_pytest(settings, suite, *([n] for n in shown))),
            "",
        ]
    return "\n".join(out)


def promotion_report(session: Session, settings: Settings, suite: str, runner: str | None) -> str:
    """The RFC's table: each part of the criterion, what is required, what was measured."""
    scope = Scope(session, settings, suite, runner)
    verdict = scope.promotion()
    where = f" on {runner}" if runner else ""
    out = [
        f"## Promotion of {suite}{where}: {verdict.headline()}",
        "",
        "| criterion | required | measured | met |",
        "| --- | --- | --- | --- |",
    ]
    for part in verdict.parts():
        mark = "yes" if part["ok"] else "**no**"
        out.append(
            f"| {_cell(part['name'])} | {_cell(part['required'])} | "
            f"{_cell(verdict.shown(part) or 'no runs')} | {mark} |"
        )
    per_runner = scope.runner_promotions()
    if len(per_runner) > 1:  # the table pooled them: say so, and how each one stands
        out += ["", f"The runs of its {len(per_runner)} runners pooled; each one alone:", ""]
        out += [
            f"- {_code(name)}: {'met' if v.met else 'not met'}, {v.standing()}"
            for name, v in per_runner.items()
        ]
    flaky = verdict.unquarantined_flaky
    if flaky:
        out += ["", "Flaky and not quarantined:", "", *(f"- {_code(n)}" for n in flaky[:50])]
    return "\n".join([*out, ""])
