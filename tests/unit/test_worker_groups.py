"""How ``make test`` spreads the tests over workers (tests/conftest.py): tests that share a
session fixture must land in one worker, or the fixture runs twice (two JVMs; two demo runs
writing the same out/ files at once)."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import pytest

from tests.conftest import LONG_GROUPS, put_long_groups_first, worker_group


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/spark/test_job.py::test_recovers_throughput", "spark"),
        ("tests/spark/test_bad_input.py::test_empty_history[1]", "spark"),
        ("tests/e2e/test_demo.py::test_capacity_rose_during_the_surge_and_fell_after_it", "demo"),
        ("tests/e2e/test_report_browser.py::test_one_marker_per_acting_decision", "demo"),
        ("tests/e2e/test_demo_namespace.py::test_tus_and_consumers_scale_together", "tests/e2e/test_demo_namespace.py"),
        ("tests/unit/test_cli.py::test_benchmark_writes_rows[a::b]", "tests/unit/test_cli.py"),
        ("tests/infra/test_checkov.py::test_infra_passes_checkov", "tests/infra/test_checkov.py"),
    ],
)
def test_tests_sharing_a_session_fixture_share_a_worker_and_other_files_go_whole(nodeid: str, group: str) -> None:
    assert worker_group(nodeid) == group


def test_every_file_using_the_shared_demo_is_in_the_demo_group() -> None:
    """A new file asking for ``demo_run`` must join the group (else a second demo runs)."""
    tests = Path(__file__).resolve().parents[1]
    users = sorted(str(path.relative_to(tests.parent)) for path in tests.rglob("test_*.py")
                   if "demo_run" in path.read_text(encoding="utf-8") and path.name != Path(__file__).name)
    assert users and all(worker_group(f"{user}::test") == "demo" for user in users), users


def test_the_long_groups_go_first_the_longest_at_the_front() -> None:
    """The scheduler calls this before handing out each group."""
    queue = OrderedDict((group, {}) for group in ["tests/unit/a.py", "demo", "tests/unit/b.py", "spark"])
    put_long_groups_first(queue)
    assert list(queue) == ["spark", "demo", "tests/unit/a.py", "tests/unit/b.py"]
    assert LONG_GROUPS[0] == "spark" and "demo" in LONG_GROUPS
