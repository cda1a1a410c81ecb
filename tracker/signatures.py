"""Device-fatal error signatures: after one of these the process's device context is poisoned and
every later test in it would fail for the same reason (docs/design.md, "Runner realities").
"""

from __future__ import annotations

import re

DEVICE_FATAL: tuple[str, ...] = (
    # Ascend runtime: 507035/507015 aicore/vector-core exception, 507034/507014 their timeouts,
    # 507901 hdc disconnect
    r"\b507\d{3}\b",
    r"\bEZ9999\b",  # CANN inner error that accompanies aicore exceptions
    r"\b207004\b",  # device unavailable
    r"(?i:hdc (?:disconnect|connect fail))",
    r"(?i:illegal memory access)",
    r"(?i:device-side assert)",
    r"(?i:unspecified launch failure)",
    r"(?i:CUDA error: (?:an )?illegal instruction)",
)


def fatal_regex(extra: list[str] | tuple[str, ...] = ()) -> str:
    """One alternation for the plugin, which matches it against every failure's text."""
    return "|".join(f"(?:{p})" for p in (*DEVICE_FATAL, *extra))


def is_device_fatal(text: str, extra: list[str] | tuple[str, ...] = ()) -> bool:
    return re.search(fatal_regex(extra), text) is not None
