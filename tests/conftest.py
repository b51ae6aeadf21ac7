"""Shared fixtures: one real Azurite for the whole test session (started and stopped here), and
how ``make test`` spreads the tests over the machine's cores (pytest-xdist's ``-n``)."""

from __future__ import annotations

import uuid

import pytest

from scaling.local.azurite import Azurite, AzuriteEndpoints

#: Files whose tests share a session fixture run in one worker, so that it is set up once: the
#: Spark session (one JVM), and the short demo run whose report two files read (it writes out/).
SHARED_SESSION_GROUPS = {"tests/spark/": "spark", "tests/e2e/test_demo.py": "demo",
                         "tests/e2e/test_report_browser.py": "demo"}


#: The groups that take longest in one worker (a minute or more each on 2 cores), started first so
#: that none is left running alone at the end while the other workers idle.
LONG_GROUPS = ("spark", "tests/unit/test_simulation_batched_peers.py", "tests/integration/test_reliability_faults.py",
               "tests/unit/test_simulation_batched_slo.py", "demo")


def worker_group(nodeid: str) -> str:
    """Which tests run in one worker: a test file's (its module fixtures set up once), or a group above."""
    path = nodeid.split("::", 1)[0]
    return next((group for prefix, group in SHARED_SESSION_GROUPS.items() if path.startswith(prefix)), path)


def put_long_groups_first(queue) -> None:
    """Move the ``LONG_GROUPS`` still in ``queue`` (xdist's ordered work queue, by group) to its
    front, in their order."""
    for group in reversed(LONG_GROUPS):
        if group in queue:
            queue.move_to_end(group, last=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's file-by-file scheduling, by ``worker_group`` (its own ``loadgroup`` marks do not
    reach the scheduler under pytest 9)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

        def _assign_work_unit(self, node) -> None:
            put_long_groups_first(self.workqueue)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


@pytest.fixture(scope="session")
def azurite() -> AzuriteEndpoints:
    """A real Azurite on free loopback ports, stopped when the session ends."""
    server = Azurite()
    endpoints = server.start()
    yield endpoints
    server.stop()


@pytest.fixture
def storage_connection_string(azurite: AzuriteEndpoints) -> str:
    return azurite.connection_string


@pytest.fixture
def unique_name() -> str:
    """A fresh lower-case name for a queue, table or container, so tests never share state."""
    return "t" + uuid.uuid4().hex[:12]
