"""``python -m scaling demo``: the whole autoscaler running locally, end to end, on real storage.

One module per job: ``cli`` (the command), ``config`` (options, constants, the policy and app
settings), ``run`` (the orchestration and the minute loop), ``reference`` (the simulate-only
cross-check), ``display`` (the terminal: live table and the summary), ``files`` (what goes to
``--out``). This package exports what the command line and the tests use.

What runs (docs/demo.md):

- **Azurite** (queues, tables, blobs) on free ports, started here and stopped on exit or Ctrl-C.
- **The three functions of function_app.py** (collect, evaluate, scale), their blueprint bodies
  invoked by ``scaling.local.host.LocalFunctionsHost``: the timer on the demo's accelerated
  clock, queue triggers served from the real ``metrics`` and ``actions`` queues with host.json's
  semantics. Their services are the production ones built by the real factories from app
  settings, installed through each blueprint's ``set_service`` hook.
- **A simulated Event Hub** (``scaling.local.simhub``) replaying a real trace through the
  benchmark's ``World``; its consumers process at the plan's capacity and write real checkpoint
  blobs that ``collect`` reads with its real checkpoint reader.
- **A simulated App Service Plan** behind a local TLS endpoint speaking ARM
  (``scaling.plans.local_arm``), resized by ``scale`` through the real azure-mgmt-web client.
  Each simulated minute the demo reads the plan's capacity and the world starts new instances
  after the scenario's provisioning delay.

Each simulated minute: advance the world one minute, write checkpoints, fire the timer, drain
the queues until idle, apply the plan's capacity to the world. At the end the run is scored like
the benchmark, cross-checked against ``python -m scaling simulate`` on the same window (the same
engine without storage), and the plot and the decision log (read back from the decision table)
are written to ``--out``.
"""

from scaling.local.demo.cli import configure, run
from scaling.local.demo.config import DemoError, DemoOptions, DemoResult, demo_target
from scaling.local.demo.reference import TOLERANCE, Tolerance, compare, simulate_summary
from scaling.local.demo.run import run_demo

__all__ = ["TOLERANCE", "DemoError", "DemoOptions", "DemoResult", "Tolerance", "compare", "configure", "demo_target",
           "run", "run_demo", "simulate_summary"]
