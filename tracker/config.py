"""Settings: `tracker.toml` (or --config / TRACKER_CONFIG) overlaid by TRACKER_* variables.

Every command works without a config file; only `run` and the scheduler need suites, and without
any configured the bundled example suite is offered under the name `example`.
"""

from __future__ import annotations

import difflib
import os
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracker.validate import InvalidRecord, check_name

EXAMPLE_SUITE_DIR = Path(__file__).parent / "example_suite"
DEFAULT_CONFIG_FILE = "tracker.toml"


class ConfigError(Exception):
    """A user-fixable problem in the configuration; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _safe_name(value: str) -> str:
    """Names go into URLs, paths and commands: `tracker.validate`'s character set."""
    try:
        return check_name(value, "the")
    except InvalidRecord as exc:
        raise ValueError(str(exc)) from None


class RunnerConfig(_Strict):
    name: str = Field(default_factory=lambda: os.uname().nodename.split(".")[0])
    device: Literal["auto", "npu", "cuda", "cpu"] = "auto"
    devices: list[int] | None = None  # None: every device found

    _name = field_validator("name")(_safe_name)


class SuiteConfig(_Strict):
    name: str
    path: Path
    # a branch, tag or commit; never an option (`--upload-pack=...` ran a command through fetch)
    ref: str | None = Field(default=None, pattern=r"^[^-\s][^\s]*$", max_length=200)
    python: str = "python3"
    args: list[str] = Field(default_factory=list)
    deselect: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    schedule: str | None = None
    test_timeout: float = Field(default=900, gt=0)
    run_timeout: float = Field(default=14400, gt=0)
    reruns: int = Field(default=2, ge=0, le=10)
    # once a test has timed out or crashed, the last part of run_timeout is kept to rerun it
    # with its device to itself: a night that runs to its limit (every cold night on one GPU)
    # otherwise confirms none (other failures are rerun at once, beside the tests)
    rerun_reserve: float = Field(default=0.1, ge=0, lt=1)
    # pytest processes side by side on each device (the tracker's answer to `-n`)
    workers_per_device: int = Field(default=1, ge=1, le=64)
    # "test": slots pull single tests, longest first; "file": a slot keeps a file's tests
    # together (for suites whose module fixtures must not run twice)
    group: Literal["test", "file"] = "test"
    # the suite's own package, whose version the probe records (e.g. "liger-kernel")
    package: str | None = None
    # compiled kernels (Triton's cache) kept between nights: a night that compiles everything
    # takes ~3x as long. Default `<data_dir>/cache/<suite>`; false: each run compiles afresh.
    # Autotuning: shared by a night's processes, tuned anew each night; kept from night to
    # night where `env` sets TRITON_CACHE_AUTOTUNING = "1", per process where "0" (runner/cache.py)
    kernel_cache: bool = True
    cache_dir: Path | None = None
    # its size cap: after each night the least recently used kernels go first until it fits,
    # none the last day used (a new version of the suite compiles anew; Liger's tests: 1.8 GB)
    kernel_cache_gb: float = Field(default=10, gt=0)

    _name = field_validator("name")(_safe_name)

    @field_validator("args")
    @classmethod
    def _no_xdist(cls, args: list[str]) -> list[str]:
        for arg in args:
            if arg == "-n" or arg.startswith(("-n=", "--numprocesses", "--dist")):
                raise ValueError(
                    "pytest-xdist options are not supported; set workers_per_device instead, so "
                    "that a crash or hang is contained to one process"
                )
        return args

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, expr: str | None) -> str | None:
        if expr is not None:
            try:
                cron_trigger(expr, "UTC")
            except ValueError as exc:
                raise ValueError(f"not a valid cron expression ({exc})") from None
        return expr


class PromotionConfig(_Strict):
    """The RFC's criterion for moving the CI upstream; every part configurable."""

    window_days: int = Field(default=14, ge=1, le=365)
    consecutive_days: int = Field(default=7, ge=1, le=365)
    min_success_rate: float = Field(default=0.95, gt=0, le=1)
    # when set, P(true rate >= min_success_rate) must also reach this (a stricter gate)
    min_confidence: float | None = Field(default=None, gt=0, lt=1)


class AnalysisConfig(_Strict):
    # days: the pass-rate windows of the overview's cards and the suite page
    windows: list[Annotated[int, Field(ge=1, le=365)]] = Field(
        default_factory=lambda: [7, 14], min_length=1, max_length=4
    )
    flaky_window_days: int = Field(default=14, ge=1, le=365)
    # a failure cluster holding this share of a run's failures (and at least cascade_min) is a
    # cascade: one cause, many victims
    cascade_share: float = Field(default=0.5, gt=0, le=1)
    cascade_min: int = Field(default=5, ge=2)
    # proposals (never applied by themselves): flaky tests with at least this many runs of
    # evidence in the window
    propose_min_flaky_runs: int = Field(default=2, ge=1)
    # a polluter-search probe is repeated until the victim fails or this many runs pass
    polluter_tries: int = Field(default=3, ge=1, le=20)
    # minutes a run may spend after it on polluter searches for its new order-dependent
    # suspects (failed in suite order, passed alone); 0: off
    polluter_budget_minutes: float = Field(default=0, ge=0, le=24 * 60)


class SchedulerConfig(_Strict):
    # a run missed while the host was down still starts on boot if at most this late
    misfire_grace_seconds: int = Field(default=6 * 3600, ge=1)
    poll_seconds: float = Field(default=5, gt=0, le=3600)  # how often `run now` requests are read
    # results (tests and attempts) of runs older than this are pruned; runs and counts stay
    retention_days: int | None = Field(default=None, ge=1)
    # a runner whose suite has not started for this long is shown in red, its status badge says
    # "no run for N days" (the nightly premise: a day and a half is a missed night)
    missed_after_hours: float = Field(default=36, gt=0, le=24 * 365)


class PushConfig(_Strict):
    """Where this runner's tracker sends each run it stores (a central `tracker serve`)."""

    url: str | None = Field(default=None, pattern=r"^https?://")  # the central dashboard's base
    timeout_seconds: float = Field(default=60, gt=0, le=3600)
    # a failed push is tried again after 30 s, then twice as long each time, up to this
    max_backoff_minutes: float = Field(default=60, gt=0, le=24 * 60)


ALERT_LEVELS = ("info", "warning", "critical")  # a destination takes its level and above


class AlertConfig(_Strict):
    """One place alerts go. The webhook's address usually holds a token, so it is never in the
    config file: `url_env` names the environment variable that holds it, and the address is
    shown nowhere (pages, logs, errors name the destination instead)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")
    format: Literal["json", "slack", "feishu", "wecom", "dingtalk", "file"]
    url_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")
    path: Path | None = None  # format "file": JSON lines appended here, for cron and mail
    suites: list[str] = Field(default_factory=list)  # empty: every suite
    level: Literal["info", "warning", "critical"] = "warning"

    @model_validator(mode="after")
    def _where(self) -> AlertConfig:
        if self.format == "file" and self.path is None:
            raise ValueError(f"alert {self.name!r}: format 'file' needs a path")
        if self.format != "file" and not self.url_env:
            raise ValueError(f"alert {self.name!r}: format {self.format!r} needs url_env")
        return self

    def url(self) -> str | None:
        """The webhook's address, from the environment; None when the variable is unset."""
        return os.environ.get(self.url_env) if self.url_env else None

    def wants(self, suite: str, level: str) -> bool:
        at_least = ALERT_LEVELS.index(level) >= ALERT_LEVELS.index(self.level)
        return at_least and (not self.suites or suite in self.suites)


class GitHubConfig(_Strict):
    """Where `tracker report --file-issue` opens issues (the token: TRACKER_GITHUB_TOKEN)."""

    repo: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    api_url: str = Field(default="https://api.github.com", pattern=r"^https?://")
    # a filed test's issue gets one comment once the test has passed this many runs in a row
    healthy_runs: int = Field(default=5, ge=1, le=365)


class Settings(BaseSettings):
    """Values from the TOML file arrive as init kwargs; TRACKER_* environment variables win."""

    model_config = SettingsConfigDict(env_prefix="TRACKER_", extra="forbid")

    database_url: str = "sqlite:///tracker.db"
    # where people reach the dashboard (e.g. https://ci.example.org/stability): the badge
    # Markdown and links in exports use it; unset, the address the page was asked on
    public_url: str | None = None
    timezone: str = "UTC"
    data_dir: Path = Path("tracker-data")  # reportlogs and pytest output of each run
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    suites: list[SuiteConfig] = Field(default_factory=list)
    # device-fatal error signatures: a match ends the pytest process after that test
    fatal_patterns: list[str] = Field(default_factory=list)
    # bearer token for writes over HTTP; from the environment (TRACKER_TOKEN), never the repo
    token: str | None = Field(default=None, min_length=16, repr=False)
    # the central server's token, for pushing runs to it (TRACKER_PUSH_TOKEN)
    push_token: str | None = Field(default=None, repr=False)
    push: PushConfig = Field(default_factory=PushConfig)
    alerts: list[AlertConfig] = Field(default_factory=list)
    github: GitHubConfig = Field(default_factory=GitHubConfig)
    github_token: str | None = Field(default=None, repr=False)  # TRACKER_GITHUB_TOKEN
    upload_max_mb: int = Field(default=64, ge=1, le=1024)  # a request body, compressed or not
    promotion: PromotionConfig = Field(default_factory=PromotionConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings
    ):
        return env_settings, init_settings

    @field_validator("timezone")
    @classmethod
    def _valid_tz(cls, tz: str) -> str:
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {tz!r}") from None
        return tz

    @model_validator(mode="after")
    def _unique_suites(self) -> Settings:
        names = [s.name for s in self.suites]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"suite names must be unique, repeated: {', '.join(dupes)}")
        return self

    def suite(self, name: str) -> SuiteConfig:
        """The named suite, ready to run (its path checked); ConfigError otherwise."""
        suites = self.suites or [example_suite()]
        for index, suite in enumerate(suites):
            if suite.name == name:
                if not suite.path.is_dir():
                    key = f"suites.{index}.path" if self.suites else "example suite"
                    raise ConfigError(f"{key}: {suite.path} is not a directory")
                return suite
        known = ", ".join(s.name for s in suites)
        raise ConfigError(
            f"suite {name!r} is not in the config (configured: {known}). Runs of it may be stored"
            " (ingested or pushed), but running, bisecting, a polluter search or a plan needs its"
            " checkout: add [[suites]] with name and path"
        )


def cron_trigger(expr: str, tz: str):
    """Five fields as crontab (`0 22 * * *`); six fields put seconds first (`*/5 * * * * *`,
    day_of_week then in APScheduler's terms: mon-sun)."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) == 6:
        names = ("second", "minute", "hour", "day", "month", "day_of_week")
        return CronTrigger(timezone=ZoneInfo(tz), **dict(zip(names, fields, strict=True)))
    if len(fields) != 5:
        raise ValueError(f"wrong number of fields: {len(fields)} (5, or 6 with seconds first)")
    minute, hour, day, month, weekday = fields
    return CronTrigger(
        minute=minute,
        hour=hour,
        day=day,
        month=month,
        day_of_week=_crontab_weekdays(weekday),
        timezone=ZoneInfo(tz),
    )


CRONTAB_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")  # crontab: 0 and 7 = sun


def _crontab_weekdays(field: str) -> str:
    """A crontab day-of-week field in APScheduler's words. APScheduler 3 reads numbers as
    0 = Monday, crontab as 0 = Sunday, and its `from_crontab` passes them through: `0 2 * * 1`
    ran on Tuesdays. Numbers, ranges and steps become day names; names stay as they are."""
    if field == "*":
        return field
    days: list[str] = []
    for item in field.split(","):
        span, _, step = item.partition("/")
        if not any(c.isdigit() for c in span) and not step:
            days.append(item)  # names: mon, mon-fri
            continue
        first, _, last = ("0-6" if span == "*" else span).partition("-")
        if not (first.isdigit() and (last or first).isdigit()):
            raise ValueError(f"not a crontab day of week: {item!r}")
        numbers = range(int(first), int(last or first) + 1, int(step or 1))
        if not numbers or numbers[-1] > 7:
            raise ValueError(f"not a crontab day of week: {item!r}")
        days += [CRONTAB_DAYS[n] for n in numbers]
    return ",".join(dict.fromkeys(days))


def example_suite() -> SuiteConfig:
    """The bundled CPU suite that lets a fresh install show the whole flow in seconds."""
    import sys

    return SuiteConfig(
        name="example",
        path=EXAMPLE_SUITE_DIR,
        python=sys.executable,
        args=["."],
        test_timeout=20,
        run_timeout=300,
        reruns=2,
        package="kernel-stability-tracker",
    )


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys allowed where `loc` points (a list index or an optional steps through)."""
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        inner = [field.annotation] if field else []
        while inner and not (isinstance(inner[0], type) and issubclass(inner[0], BaseModel)):
            inner = [a for a in typing.get_args(inner[0]) if a is not type(None)][:1]
        if not inner:
            return []
        model = inner[0]
    return list(model.model_fields)


def _format_error(exc: ValidationError, source: str) -> str:
    """Every problem, each with its key; an unknown key with the nearest known one."""
    problems = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            near = difflib.get_close_matches(
                str(err["loc"][-1]), _known_keys(Settings, err["loc"]), n=1
            )
            msg = "unknown key" + (f" (did you mean {near[0]}?)" if near else "")
        problems.append(f"{key}: {msg}")
    return f"{source}: " + "; ".join(problems)


def load_settings(path: str | Path | None = None) -> Settings:
    """Read the config; the file is optional unless named explicitly."""
    explicit = path or os.environ.get("TRACKER_CONFIG")
    file = Path(explicit) if explicit else Path(DEFAULT_CONFIG_FILE)
    data: dict[str, Any] = {}
    if file.is_file():
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    elif explicit:
        raise ConfigError(f"config file {file} does not exist")
    base = file.resolve().parent
    for suite in data.get("suites", []) if isinstance(data.get("suites"), list) else []:
        if isinstance(suite, dict) and isinstance(suite.get("path"), str):
            suite["path"] = str(base / Path(suite["path"]).expanduser())
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, str(file) if file.is_file() else "settings")) from None
