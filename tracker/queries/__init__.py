"""The reads: every SELECT of the tracker lives in this package, one module per area (the
writes are `store`'s). Call sites use `queries.NAME`; the modules say where each lives."""

from tracker.queries.alerts import (
    issue_links,
    run_alert,
    unsent_deliveries,
)
from tracker.queries.locks import (
    busy,
    running,
    state_stamp,
)
from tracker.queries.runner import (
    investigations,
    order_suspects,
    recent_attempts,
    replay_order,
)
from tracker.queries.runs import (
    RESULT_ORDER,
    NotFound,
    environment_dict,
    existing_runs,
    failing_attempts,
    final_outcomes,
    latest_run_id,
    list_runs,
    previous_run_id,
    run_attempt_times,
    run_detail,
    run_dict,
    run_info,
    run_kernels,
    run_results,
    slowest,
    store_id,
    suite_runner_pairs,
)
from tracker.queries.tests import (
    case_history,
    case_info,
    failure_trace,
    test_ids,
)

__all__ = [
    "RESULT_ORDER",
    "NotFound",
    "busy",
    "case_history",
    "case_info",
    "environment_dict",
    "existing_runs",
    "failing_attempts",
    "failure_trace",
    "final_outcomes",
    "investigations",
    "issue_links",
    "latest_run_id",
    "list_runs",
    "order_suspects",
    "previous_run_id",
    "recent_attempts",
    "replay_order",
    "run_alert",
    "run_attempt_times",
    "run_detail",
    "run_dict",
    "run_info",
    "run_kernels",
    "run_results",
    "running",
    "slowest",
    "state_stamp",
    "store_id",
    "suite_runner_pairs",
    "test_ids",
    "unsent_deliveries",
]
