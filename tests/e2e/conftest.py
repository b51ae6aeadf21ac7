"""One short demo run for the whole session (tests/e2e/shared_demo.py says what it holds)."""

from __future__ import annotations

import pytest

from tests.e2e.shared_demo import DemoRun, run_shared_demo


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    return run_shared_demo(tmp_path_factory.mktemp("demo"))
