"""The kernel table the maintainers used to keep by hand in their RFC: one row per tested file."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tracker.analysis.flaky import BROKEN, FAILING_VERDICT, FLAKY_VERDICT, NO_DATA, CaseStats
from tracker.analysis.stats import wilson
from tracker.words import percent

KERNEL_STABLE, KERNEL_FLAKY, KERNEL_FAILING, KERNEL_NOT_RUN = (
    "stable",
    "flaky",
    "failing",
    "not run",
)
ICONS = {KERNEL_STABLE: "✅", KERNEL_FLAKY: "🟡", KERNEL_FAILING: "❌", KERNEL_NOT_RUN: "⚪"}


@dataclass
class KernelRow:
    kernel: str
    tests: int = 0
    runs: int = 0  # test executions that passed or failed (skips do not count)
    failures: int = 0
    flaky: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)  # broken or always failing, not quarantined
    quarantined: int = 0

    @property
    def status(self) -> str:
        if self.failing:
            return KERNEL_FAILING
        if self.flaky:
            return KERNEL_FLAKY
        return KERNEL_STABLE if self.runs else KERNEL_NOT_RUN

    def as_dict(self) -> dict[str, Any]:
        lo, hi = wilson(self.runs - self.failures, self.runs)
        return {
            "kernel": self.kernel,
            "status": self.status,
            "tests": self.tests,
            "executions": self.runs,
            "pass_rate": round(1 - self.failures / self.runs, 4) if self.runs else None,
            "pass_rate_interval": [round(lo, 4), round(hi, 4)] if self.runs else None,
            "flaky_tests": self.flaky,
            "failing_tests": self.failing,
            "quarantined": self.quarantined,
        }


def kernel_table(stats: dict[int, CaseStats]) -> list[KernelRow]:
    rows: dict[str, KernelRow] = defaultdict(lambda: KernelRow(""))
    for s in stats.values():
        row = rows[s.kernel]
        row.kernel = s.kernel
        row.tests += 1
        row.runs += s.runs
        row.failures += s.failures
        row.quarantined += s.quarantined
        if s.quarantined or s.verdict == NO_DATA:
            continue
        if s.verdict == FLAKY_VERDICT:
            row.flaky.append(s.nodeid)
        elif s.verdict in (BROKEN, FAILING_VERDICT):
            row.failing.append(s.nodeid)
    return sorted(rows.values(), key=lambda r: r.kernel)


def markdown(rows: list[KernelRow], window_days: int, link: str | None = None) -> str:
    """Paste-ready for the RFC. With `link` (the suite's page at the public URL), each kernel
    links to its page there."""
    lines = [
        f"| Kernel | Status | Tests | Pass rate ({window_days}d) | Flaky | Failing |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        rate = percent(1 - r.failures / r.runs) if r.runs else "–"
        name = f"[{r.kernel}]({link}/kernels/{quote(r.kernel, safe='')})" if link else r.kernel
        lines.append(
            f"| {name} | {ICONS[r.status]} {r.status} | {r.tests} | {rate} | "
            f"{len(r.flaky)} | {len(r.failing)} |"
        )
    return "\n".join(lines)
