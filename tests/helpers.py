"""Small helpers shared by the tests: a clock to drive, and a function of ``function_app.app``."""

from __future__ import annotations

from datetime import datetime
from typing import Any


class Clock:
    """A clock the test sets (``clock.now = ...``) and the code under test calls."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def app_function(name: str) -> Any:
    """The function called ``name`` as the host indexes it from ``function_app.app``.

    ``get_functions()`` remembers the names it returned and raises on a second call (azure-functions
    1.26); the host calls it once per process, tests many times, so index afresh and leave the app
    as found.
    """
    from function_app import app

    seen, app.functions_bindings = app.functions_bindings, None
    try:
        [function] = [f for f in app.get_functions() if f.get_function_name() == name]
    finally:
        app.functions_bindings = seen
    return function
