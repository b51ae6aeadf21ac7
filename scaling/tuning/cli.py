"""``python -m scaling tune``: the Spark tuning job, embedded (``local[*]`` unless ``--master``).

The job itself is ``scaling/tuning/job.py``, which also runs unchanged under ``spark-submit``.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    from scaling.tuning.job import configure as configure_job

    configure_job(parser)


def run(args: argparse.Namespace) -> int:
    from scaling.tuning.job import run as run_job

    return run_job(args)
