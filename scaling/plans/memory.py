"""A plan adapter in memory: for tests, simulations and the local demo.

Records every write so that tests can assert "written at most once per decision"; failures can
be scripted per call.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import replace

from scaling.domain.policy import PlanSettings
from scaling.plans.base import PlanError, PlanInfo, PlanNotFoundError


class InMemoryPlans:
    def __init__(self, plans: dict[str, PlanInfo] | None = None) -> None:
        self.plans: dict[str, PlanInfo] = dict(plans or {})
        self.writes: list[tuple[str, int]] = []
        self.reads = 0
        self.fail_next: list[Exception] = []
        self.on_write: Callable[[str, int], None] | None = None
        #: Enabled Azure Monitor autoscale settings per plan (resource id, lower case) -> names.
        self.autoscale_settings: dict[str, tuple[str, ...]] = {}
        self.autoscale_settings_error: Exception | None = None
        self._lock = threading.Lock()

    def add(self, resource_id: str, capacity: int, *, sku_name: str = "S1", sku_tier: str = "Standard",
            max_instances: int = 10, kind: str = "dedicated", minimum_capacity: int = 1) -> PlanInfo:
        info = PlanInfo(resource_id, capacity, sku_name, sku_tier, max_instances, kind, minimum_capacity)
        self.plans[resource_id] = info
        return info

    def _take_failure(self) -> None:
        if self.fail_next:
            raise self.fail_next.pop(0)

    def get_plan(self, resource_id: str) -> PlanInfo:
        with self._lock:
            self.reads += 1
            self._take_failure()
            if resource_id not in self.plans:
                raise PlanNotFoundError(f"plan {resource_id} not found (404)", status_code=404)
            return self.plans[resource_id]

    def set_capacity(self, resource_id: str, capacity: int) -> PlanInfo:
        with self._lock:
            self._take_failure()
            if resource_id not in self.plans:
                raise PlanNotFoundError(f"plan {resource_id} not found (404)", status_code=404)
            if capacity < 1 or capacity > self.plans[resource_id].max_instances:
                raise PlanError(f"capacity {capacity} is outside 1..{self.plans[resource_id].max_instances}", status_code=400)
            info = self.plans[resource_id]
            if info.capacity == capacity:
                return info
            self.plans[resource_id] = info = replace(info, capacity=capacity)
            self.writes.append((resource_id, capacity))
        if self.on_write:
            self.on_write(resource_id, capacity)
        return info

    def read_capacity(self, plan: PlanSettings) -> int:
        return self.get_plan(plan.resource_id).capacity

    async def current_capacity(self, plan: PlanSettings) -> int:
        return await asyncio.to_thread(self.read_capacity, plan)

    def enabled_autoscale_settings(self, resource_id: str) -> tuple[str, ...]:
        with self._lock:
            if self.autoscale_settings_error is not None:
                raise self.autoscale_settings_error
            return self.autoscale_settings.get(resource_id.lower(), ())

    async def current_autoscale_settings(self, plan: PlanSettings) -> tuple[str, ...]:
        return await asyncio.to_thread(self.enabled_autoscale_settings, plan.resource_id)
