"""Progress on the terminal while a suite runs: tests done / expected, failures so far, elapsed."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from tracker.records import FAILING, PASSED, AttemptRecord
from tracker.runner.execute import Reporter


class RichReporter(Reporter):
    def __init__(self, console: Console) -> None:
        self.console = console
        self.failures = 0
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failures]} failing"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task = self.progress.add_task("collecting", total=None, failures=0)

    def __enter__(self) -> RichReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def collected(self, total: int) -> None:
        self.progress.update(self.task, description="running", total=total)

    def attempt(self, attempt: AttemptRecord, rerun: bool) -> None:
        if rerun:
            verdict = "passed: flaky" if attempt.outcome == PASSED else attempt.outcome
            self.progress.console.print(Text(f"  rerun {verdict}: {attempt.nodeid}", style="dim"))
            return
        if attempt.outcome in FAILING:
            self.failures += 1
            line = Text(f"{attempt.outcome.upper()} ", style="bold red")
            line.append(attempt.nodeid)
            if attempt.message:
                line.append(f"  {attempt.message.splitlines()[0][:160]}", style="dim")
            self.progress.console.print(line)
        self.progress.update(self.task, advance=1, failures=self.failures)

    def note(self, text: str) -> None:
        self.progress.console.print(Text(f"note: {text[:500]}", style="yellow"))
