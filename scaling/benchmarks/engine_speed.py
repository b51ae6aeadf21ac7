"""``python -m scaling bench-engine``: the engine in the loop, in simulated minutes per CPU-second.

Replays the first ``--days`` days of a trace through the standard world with the project-default
policy's real ``evaluate`` in the loop (``EngineAutoscaler`` under ``simulate``: one target, one
evaluation a minute), and reports simulated minutes per CPU-second of the process that runs it.

With ``--against REF`` the same loop also runs on REF, checked out into a temporary git
worktree (removed afterwards). The two trees run in their own processes and take turns, round
by round (``--rounds``), so that other work on a shared machine slows both alike; each tree's
fastest round counts (other work only ever slows a run down), its median beside it (one lucky
round on a busy machine moves the fastest), and the load average is printed beside the figures. The runs' cost and action counts are compared: a speed-up that changed a
decision shows here (the equivalence tests say which).

The loop uses only what every tree since the batched simulators has (``simulate``,
``EngineAutoscaler``, ``simulated_target``), so an older REF runs the same code path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from scaling.simulation.world.traces import WORLDCUP98, existing_trace

#: What each tree's process runs: one replay per line read, one JSON line written per replay.
WORKER = r"""
import json, sys, time
try:
    from scaling.simulation.peers import looped as peers
    from scaling.simulation.world.loop import Scenario, load_trace, scale_trace, simulate
except ImportError:  # a tree from before simulation/ had subpackages
    from scaling.simulation import peers
    from scaling.simulation.world import Scenario, load_trace, scale_trace, simulate
scenario = Scenario.named("standard")
arrivals = scale_trace(load_trace(sys.argv[1])[: int(sys.argv[2])], scenario)
for _ in sys.stdin:
    started = time.process_time()
    result = simulate(arrivals, peers.EngineAutoscaler(peers.simulated_target(scenario, name="default")), scenario)
    seconds = time.process_time() - started
    print(json.dumps({"minutes": len(arrivals), "cpu_seconds": seconds, "cost": result.cost,
                      "scale_actions": result.scale_actions, "slo_violation_minutes": result.slo_violation_minutes,
                      "max_age_minutes": result.max_age_minutes}), flush=True)
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _describe(tree: Path) -> str:
    """The tree's commit, with ``+changes`` when it has uncommitted ones."""
    commit = _git(tree, "rev-parse", "--short", "HEAD")
    return commit + ("+changes" if _git(tree, "status", "--porcelain", "--untracked-files=no") else "")


@contextlib.contextmanager
def trees_to_compare(here: Path, against: str | None, prefix: str) -> Iterator[list[tuple[str, Path]]]:
    """(label, folder) of this tree and, with ``against``, of that git ref checked out into a
    temporary worktree (removed afterwards): what a benchmark's ``--against`` runs side by side."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        trees = [(f"this tree ({_describe(here)})", here)]
        checkout = Path(scratch) / "ref"
        if against:
            _git(here, "worktree", "add", "--detach", str(checkout), against)
            trees.append((f"{against} ({_git(checkout, 'rev-parse', '--short', 'HEAD')})", checkout))
        try:
            yield trees
        finally:
            if against:
                _git(here, "worktree", "remove", "--force", str(checkout))


class Replayer:
    """One tree's worker process (started at construction, stopped by ``close``)."""

    def __init__(self, label: str, tree: Path, trace: Path, minutes: int) -> None:
        self.label, self.rounds = label, []
        self.process = subprocess.Popen([sys.executable, "-c", WORKER, str(trace), str(minutes)], cwd=tree, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env={**os.environ, "PYTHONPATH": str(tree)})

    def replay(self) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"error: the replay on {self.label} failed (its error is above)")
        measured = json.loads(line)
        measured["minutes_per_cpu_second"] = measured["minutes"] / measured["cpu_seconds"]
        self.rounds.append(measured)
        return measured

    def best(self) -> dict:
        return max(self.rounds, key=lambda measured: measured["minutes_per_cpu_second"])

    def median(self) -> float:
        return statistics.median(measured["minutes_per_cpu_second"] for measured in self.rounds)

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default=str(WORLDCUP98), type=existing_trace,
                        help="per-minute trace CSV (default: data/traces/worldcup98/per_minute.csv)")
    parser.add_argument("--days", type=float, default=3.0, help="replay the trace's first DAYS days (default 3)")
    parser.add_argument("--against", metavar="REF", help="also replay on this git ref (a temporary worktree), taking turns")
    parser.add_argument("--rounds", type=int, default=5, help="replays per tree; the fastest counts (default 5)")
    parser.add_argument("--json", help="also write the measurements here")


def run(args: argparse.Namespace) -> int:
    here = Path(__file__).resolve().parents[2]
    trace = Path(args.trace).resolve()
    if not trace.exists():
        print(f"error: trace not found: {trace} (--trace)", file=sys.stderr)
        return 2
    minutes = int(args.days * 1440)
    with trees_to_compare(here, args.against, "bench-engine-") as trees:
        replayers = [Replayer(label, tree, trace, minutes) for label, tree in trees]
        try:
            load_before = os.getloadavg()
            for round_ in range(args.rounds):
                for replayer in replayers:
                    measured = replayer.replay()
                    print(f"round {round_ + 1}/{args.rounds}: {replayer.label}: {measured['minutes_per_cpu_second']:,.0f} "
                          f"minutes/CPU-s (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
            load_after = os.getloadavg()
        finally:
            for replayer in replayers:
                replayer.close()
    print(f"engine in the loop: {trace.name} of {trace.parent.name}, first {minutes:,} minutes, project-default, "
          f"standard world; fastest and median of {args.rounds} rounds, the trees taking turns")
    print(f"load average before {[round(x, 2) for x in load_before]}, after {[round(x, 2) for x in load_after]} "
          f"({os.cpu_count()} cores)")
    for replayer in replayers:
        best = replayer.best()
        rounds = ", ".join(f"{measured['minutes_per_cpu_second']:,.0f}" for measured in replayer.rounds)
        print(f"  {replayer.label}: {best['minutes_per_cpu_second']:,.0f} simulated minutes per CPU-second, median "
              f"{replayer.median():,.0f} (rounds: {rounds}); "
              f"cost {best['cost']:g}, {best['scale_actions']} scale actions, {best['slo_violation_minutes']} SLO-violation minutes")
    if len(replayers) == 2:
        mine, theirs = (replayer.best() for replayer in replayers)
        same = all(mine[key] == theirs[key] for key in ("cost", "scale_actions", "slo_violation_minutes", "max_age_minutes"))
        print(f"  this tree / {args.against}: {mine['minutes_per_cpu_second'] / theirs['minutes_per_cpu_second']:.3f} fastest, "
              f"{replayers[0].median() / replayers[1].median():.3f} median; "
              f"decisions: {'the same cost, actions and ages' if same else 'DIFFERENT cost, actions or ages'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"trace": str(trace), "minutes": minutes, "load_average_before": load_before,
                                               "load_average_after": load_after,
                                               "trees": {r.label: r.rounds for r in replayers}}, indent=1))
    return 0
