"""The benchmark command's family and gate options (``--family``, ``--gate``, ``--write-baseline``).

Kept apart from the benchmark command (benchmark.py), which calls in here at a few points (arguments, the members to
run, the family's text, what to do after the run), so that the family and the gate change
without touching the benchmark's own rows and tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from scaling.benchmarks import family, gate
from scaling.simulation.world import trace_family
from scaling.simulation.world.traces import PUBLIC_TRACES

#: The hand-written log of baseline changes in docs/benchmark.md: kept when the file is regenerated.
LOG_START, LOG_END = "<!-- baseline-log:start -->", "<!-- baseline-log:end -->"
EMPTY_LOG = "| date | commit | why the baseline changed |\n|---|---|---|\n"


def add_family_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--family", action="store_true",
                        help="also run the trace family (every member of scaling/simulation/world/trace_family.py) in every scenario")
    parser.add_argument("--burst-family", action="store_true",
                        help="also run the opt-in bursty and clock-driven members (trace_family.BURST_SHAPES; "
                        "outside the gate), e.g. with --algorithm project-forecast --algorithm perfect-lookahead")
    parser.add_argument("--gate", metavar="BASELINE.json",
                        help="compare project-default with this baseline and exit 1, naming each row, when the family "
                        "median is more than 1%% dearer, a trace more than 3%% dearer, or a trace newly misses the SLO; "
                        "alone (no --trace, no --family) it runs project-default on the baseline's traces and scenarios only")
    parser.add_argument("--write-baseline", metavar="PATH", help="write this run's project-default figures as a gate baseline")
    parser.add_argument("--algorithm", action="append",
                        help="run only this algorithm (repeatable; default: every one), e.g. project-default and "
                        "clairvoyant for a quick look at the family")
    parser.add_argument("--traces-dir", default=str(PUBLIC_TRACES),
                        help="where --gate alone finds the baseline's trace files (default: data/traces)")


def gate_alone(args: argparse.Namespace) -> bool:
    """``--gate`` with nothing else to run: only the gated algorithm, on the baseline's own traces."""
    return bool(args.gate) and not args.trace and not args.family and not getattr(args, "burst_family", False)


def check_arguments(args: argparse.Namespace) -> None:
    """A run needs traces (files or the family) and somewhere to write its rows."""
    if not args.trace and not args.family and not args.burst_family:
        raise SystemExit("benchmark: give --trace PATH (repeatable), --family, --burst-family, or --gate BASELINE.json alone")
    if not args.json:
        raise SystemExit("benchmark: --json PATH is needed to write the rows (only --gate alone runs without it)")


def members(args: argparse.Namespace) -> list[str]:
    bursts = [trace_family.FAMILY_PREFIX + name for name in trace_family.burst_family_names()] \
        if getattr(args, "burst_family", False) else []
    return (family.family_traces() if args.family else []) + bursts


def split_rows(rows: Sequence[dict]) -> tuple[list[dict], list[dict]]:
    """(the public traces' rows, the family's rows): each has its own tables."""
    return [row for row in rows if not family.is_family_row(row)], [row for row in rows if family.is_family_row(row)]


def family_text(family_rows: Sequence[dict]) -> str:
    return family.family_markdown(family_rows) if family_rows else ""


def readme_text(family_rows: Sequence[dict]) -> str:
    if not family_rows:
        return ""
    count = len({row["trace"] for row in family_rows})
    return (f"\nThe trace family ({count} generated members of {len(family.SHAPES)} shapes at "
            f"{len(family.trace_family.NOISE_LEVELS)} noise levels; per shape and per noise level in "
            "[docs/benchmark.md](docs/benchmark.md#the-trace-family)):\n\n" + family.readme_summary(family_rows))


def kept_sections(markdown: str) -> str:
    """The baseline log of an existing docs/benchmark.md (an empty log when there is none)."""
    path = Path(markdown)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if LOG_START in text and LOG_END in text:
        return text.split(LOG_START, 1)[1].split(LOG_END, 1)[0].strip("\n") + "\n"
    return EMPTY_LOG


FAMILY_INTRO = """## The trace family

Two traces are too few to choose rules by. `--family` adds 30 generated members
(`scaling/simulation/world/trace_family.py`, pure numpy, seeded: a member is a function of its name):
six shapes (`diurnal`: daily and weekly cycles only; `bursts`: Markov-modulated on/off at 2-4x;
`flash`: 2-4 crowds rising 5-20x over 5-30 minutes and decaying over 1-4 hours; `growth`: 2-4x
over the fortnight; `steps`: levels held 0.5-2.5 days, moving up and down by at least 40%;
`spikes`: heavy-tailed, Pareto 1.5, 1-5 minutes long) on a daily and weekly base, each at five
seeds that take the five noise levels 2%, 5%, 10%, 20% and 35% (multiplicative, independent per
minute; the level is the mean absolute minute-to-minute change over the mean, the measure by
which WC98 has 3% and NASA 28%). 14 days each at one-minute resolution, scaled as the public
traces are: the busiest minute needs 24 instances. A member's name says its shape, seed and
noise level (`flash-seed3-noise10`).

Every member runs in every scenario of the run with every algorithm. 30 members in two scenarios
are 15 times the public traces' work, and a simulated minute costs about the same for one column
as for a few hundred (numpy's per-call overhead), so members of one length run as **columns of
one step**: the `Physics` takes each column's trace (`trace_of`), and a work unit holds up to ten
members' peers sweeps, seed sweeps, or `project-default` and `project-tuned` pairs, whose tunings
run together too (`robust.tune_many`). Every row is the
one the member gets alone, bit for bit (tests in `test_simulation_batched_peers.py`,
`test_simulation_batched_slo.py`, `test_simulation_robust.py`; the rows of a whole run compared
to the previous run's). The wall time of a whole run is the last line of this page. Two cuts
keep the family's share down further: the peers' sweeps keep only the values that matter
(`FAMILY_SWEEPS` in `scaling/benchmarks/family.py`: each peer's documented default, KEDA's 64 and
the Functions extension's 100, and the region of its best settings on the public traces: KEDA and
Functions 200, 400 and 1000, Azure Monitor 200 at steps 1 and 4, the seed rule its own 1000; the
clairvoyant keeps its three horizons). `project-tuned` runs on the family in `standard` and
`realistic` (`TUNED_SCENARIOS`: every scenario with a history to tune on; its tuning is the
largest share of the run's work), tuned on each member's first 30% and scored on the rest, and
each scenario's family table says how it compares with `project-default` on those same minutes. The
line after the tables counts the members whose best setting sits at an edge of a peer's cut sweep
(there a wider sweep might find a cheaper one). The public traces keep the full sweeps
of docs/benchmark-contract.md and every algorithm in every scenario.

`azure_llm2023_code` is under an hour: `per_second.csv` (3,437 s) and `per_minute.csv` (58 minutes,
the same 8,819 requests binned by minute). It runs as the other public traces do, from
`per_minute.csv`: the simulated world steps by the minute, and the per-second file summed into
whole minutes would drop its last 17 seconds. An hour is mostly the run's start (one instance, an empty
backlog), so it tests the warm-up, not cost over days: it is not a family member and not in the
family's medians, and the gate holds it to the member rules (3%, the SLO) like every trace.

"""

GATE_TEXT = """## The regression gate

`python -m scaling benchmark --gate docs/benchmark-baseline.json` runs `project-default` on every
trace and scenario of the committed baseline (the family and the public traces: project-default's
own runs, about a third of `make benchmark`'s work) and exits 1, naming each row, when

- the family's median cost (cost / fluid bound, per scenario) is more than 1% dearer than the
  baseline's,
- any trace (family member or public) is more than 3% dearer,
- any trace that met the SLO in the baseline misses it now (as its world is judged: the avoidable violation
  minutes in `realistic`, the whole hub's in `standard`),
- a baseline row is missing from the run.

Cheaper is never a failure. Run it before every change to the engine. With `--trace`/`--family`
the gate checks the full run's rows instead (`make benchmark` does). `--write-baseline PATH`
writes a run's project-default figures as a new baseline; the baseline changes only in a commit
that says why in the log below (kept by hand: regeneration leaves it as it is).

"""


def markdown_text(family_rows: Sequence[dict], kept_log: str) -> str:
    """docs/benchmark.md's family section, the gate's description and the baseline log."""
    parts = []
    if family_rows:
        parts += [FAMILY_INTRO, family.family_markdown(family_rows), "\n"]
    parts += [GATE_TEXT, "### Baseline changes\n\n", LOG_START, "\n", kept_log, LOG_END, "\n\n"]
    return "".join(parts)


def after_run(args: argparse.Namespace, rows: Sequence[dict]) -> int:
    """``--write-baseline`` and ``--gate`` on a full run's rows; the command's exit code."""
    if args.write_baseline:
        write_baseline(args.write_baseline, rows)
    if not args.gate:
        return 0
    _, baseline = gate.read_baseline(args.gate)
    code, text = gate.gate_report(baseline, gate.gated_rows(rows), args.gate)
    print(text)
    return code


def write_baseline(path: str, rows: Sequence[dict]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(gate.baseline_document(rows), indent=1) + "\n", encoding="utf-8")
    print(f"baseline written to {path}", file=sys.stderr)


def baseline_trace_path(trace: str, traces_dir: str) -> str:
    """Where a baseline's trace comes from: a family member by name, a file under ``traces_dir``."""
    if family.trace_family.is_member(trace):
        return trace
    path = Path(traces_dir) / trace
    if not path.exists():
        raise SystemExit(f"--gate: the baseline's trace {trace} is not under --traces-dir {traces_dir}")
    return str(path)


def run_gate_alone(args: argparse.Namespace, run_gated: Callable[..., list[dict]]) -> int:
    """Run the gated algorithm on the baseline's traces and scenarios (``run_gated``: the
    benchmark's runner), then compare."""
    started = time.perf_counter()
    algorithm, baseline = gate.read_baseline(args.gate)
    rows = run_gated([(baseline_trace_path(row.trace, args.traces_dir), row.scenario) for row in baseline], algorithm,
                     args.workers)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if args.write_baseline:
        write_baseline(args.write_baseline, rows)
    code, text = gate.gate_report(baseline, gate.gated_rows(rows, algorithm), args.gate)
    print(text)
    print(f"gate: {len(rows)} runs in {time.perf_counter() - started:.0f}s on {args.workers or os.cpu_count()} workers",
          file=sys.stderr)
    return code
