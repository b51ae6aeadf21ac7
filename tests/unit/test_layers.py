"""Every import contract (pyproject.toml ``[tool.importlinter]``, run by ``make lint``) must break
on what it is there to stop: an upward import, an import between independent adapters, a
circle, an SDK in the core, the offline stacks and the app reaching into each other, the
simulation's rooms out of order, and a new package that no layer names. Each case runs
``lint-imports`` on a copy of the package with one bad import injected."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(tree / "pyproject.toml")],
                          cwd=tree, env=environ, capture_output=True, text=True, timeout=300)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "scaling", tmp_path / "scaling", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def verdict(output: str, contract: str) -> str:
    """KEPT or BROKEN: the word that follows the contract's name in the report."""
    text = " ".join(output.split())
    after = text[text.index(contract) + len(contract):]
    return min(("KEPT", "BROKEN"), key=lambda word: after.find(word) if word in after else len(after))


def inject(tree: Path, module: str, line: str) -> None:
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_package_keeps_every_contract(tree):
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("scaling/domain/lag.py", "import scaling.services.collect", "the deployed app: entry points"),
    ("scaling/services/scale.py", "import scaling.bootstrap", "the deployed app: entry points"),
    ("scaling/storage/base.py", "import scaling.plans.base", "the deployed app: entry points"),
    ("scaling/simulation/world/loop.py", "import scaling.tuning.history", "the offline stacks: entry points"),
    ("scaling/domain/decisions.py", "import scaling.domain.engine", "no import circles"),
    ("scaling/domain/namespace/sizing.py", "import scaling.domain.namespace.planning", "no import circles"),
    ("scaling/domain/namespace/planning.py", "import scaling.domain.evaluation", "no import circles"),
    ("scaling/domain/samples.py", "import azure.core", "talk to no SDK"),
    ("scaling/services/telemetry.py", "import opentelemetry.metrics", "talk to no SDK"),
    ("scaling/tuning/job.py", "import scaling.benchmarks.gate", "the offline stacks: entry points"),
    ("scaling/benchmarks/gate.py", "import scaling.services.evaluate", "never reach into the deployed app"),
    ("scaling/simulation/world/scenario.py", "import scaling.storage.base", "stands on the domain alone"),
    ("scaling/services/evaluate.py", "import scaling.benchmarks.benchmark", "never imports the offline stacks"),
    ("scaling/simulation/world/loop.py", "import scaling.simulation.peers.looped", "inside the simulation"),
    ("scaling/simulation/peers/flink.py", "import scaling.simulation.drivers.batched", "inside the simulation"),
    ("scaling/simulation/queue/world.py", "import scaling.simulation.namespace.world", "inside the simulation"),
], ids=["domain-imports-a-service", "service-imports-the-root", "adapter-imports-adapter",
        "simulation-imports-tuning", "circle", "circle-inside-a-package",
        "namespace-planning-imports-the-plan-targets-evaluation", "sdk-in-the-domain", "sdk-in-a-service", "tuning-imports-a-benchmark",
        "benchmark-imports-a-service", "simulation-imports-storage", "app-imports-a-benchmark",
        "world-imports-a-peer", "peer-imports-a-driver", "queue-imports-namespace"])
def test_a_bad_import_breaks_the_contract(tree, module, line, broken):
    inject(tree, module, line)
    result = lint_imports(tree)
    assert result.returncode != 0
    assert verdict(result.stdout, broken) == "BROKEN", result.stdout


def test_a_package_no_layer_names_breaks_the_contract(tree):
    (tree / "scaling" / "reports").mkdir()
    (tree / "scaling" / "reports" / "__init__.py").write_text("", encoding="utf-8")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "scaling.reports" in result.stdout


def test_a_simulation_room_no_layer_names_breaks_the_contract(tree):
    (tree / "scaling" / "simulation" / "extras").mkdir()
    (tree / "scaling" / "simulation" / "extras" / "__init__.py").write_text("", encoding="utf-8")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert verdict(result.stdout, "inside the simulation") == "BROKEN", result.stdout
