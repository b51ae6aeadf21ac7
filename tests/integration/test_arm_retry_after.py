"""A malformed Retry-After through the REAL azure-mgmt-web client against the local ARM endpoint:
the call backs off by default and succeeds instead of escaping as ``ValueError``."""

from __future__ import annotations

import pytest

from scaling.plans.appservice import AppServicePlanAdapter
from scaling.plans.base import PlanError
from scaling.plans.local_arm import LocalArm, serve_local_arm
from scaling.storage.synthetic import plan_id

PLAN = plan_id("plan-retry-after")


@pytest.fixture
def endpoint():
    with serve_local_arm() as served:
        yield served


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_429_with_garbage_retry_after_is_retried_then_succeeds(endpoint, method: str) -> None:
    endpoint.arm.add_plan(PLAN, capacity=2)
    endpoint.arm.fail(429, method=method, times=2, retry_after="soon")
    adapter = AppServicePlanAdapter(endpoint.credential, base_url=endpoint.base_url, retry_total=3, retry_backoff_factor=0.01,
                                    polling_interval=0, **endpoint.client_kwargs())
    try:
        info = adapter.set_capacity(PLAN, 3)
    finally:
        adapter.close()
    assert info.capacity == 3
    assert endpoint.arm.capacity(PLAN) == 3
    assert [request for request, _ in endpoint.arm.requests].count(method) == 3  # two 429s, then the answer



class AcceptedWithGarbledRetryAfter(LocalArm):
    """Answers a PUT 202 Accepted with ``Retry-After: soon``, as a long-running ARM operation
    would; azure-core's LRO poller parses that header itself and raises ``ValueError``."""

    def handle(self, request):
        from werkzeug import Response

        accepted = {"Location": request.host_url + "operations/1", "Retry-After": "soon"}
        if request.method == "PUT" or request.path == "/operations/1":
            return Response("", status=202, headers=accepted)
        return super().handle(request)


def test_an_exception_other_than_azure_error_from_the_client_is_a_plan_error() -> None:
    arm = AcceptedWithGarbledRetryAfter()
    arm.add_plan(PLAN, capacity=2)
    with serve_local_arm(arm) as served:
        adapter = AppServicePlanAdapter(served.credential, base_url=served.base_url, retry_total=0, polling_interval=0,
                                        **served.client_kwargs())
        try:
            with pytest.raises(PlanError, match="ValueError while setting capacity 3"):
                adapter.set_capacity(PLAN, 3)
        finally:
            adapter.close()
