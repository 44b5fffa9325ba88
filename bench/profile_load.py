"""Where a bulk load's time goes: one `Scheduler.load` of a Parquet file of votes, in this
process, under cProfile (the driver), with Spark's own per-job and per-stage numbers from its
status store (wall time, tasks' run and CPU time, GC, rows in and out, shuffle bytes).

    .venv/bin/python bench/profile_load.py [--rows 2000000] [--dir /tmp] [--top 15]

A load of a tenth of the rows runs first, untimed, to start Spark and warm its code. On a
shared machine the tasks' run time includes waiting for a core: their CPU time is the measure
that holds still.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pomoview.server.load.bulk_load import Progress  # noqa: E402
from pomoview.server.scheduler.scheduler import Scheduler  # noqa: E402
from pomoview.server.spark.session import create_spark_session  # noqa: E402

PROGRAM = (Path(__file__).resolve().parents[1] / "examples" / "votes.pomo").read_text()


def _seconds(start: Any, end: Any) -> float:
    """The span between two of the status store's `Option[Date]`s; -1 if either is unset."""
    if not (start.isDefined() and end.isDefined()):
        return -1.0
    return float(end.get().getTime() - start.get().getTime()) / 1000


def _jobs(store: Any) -> dict[int, Any]:
    found = store.jobsList(None).iterator()
    jobs = {}
    while found.hasNext():
        job = found.next()
        jobs[int(job.jobId())] = job
    return jobs


def report_spark(store: Any, jobs: list[Any]) -> None:
    for job in jobs:
        ids = job.stageIds()
        stages = [int(ids.apply(i)) for i in range(ids.length())]
        print(
            f"job {job.jobId()}: {_seconds(job.submissionTime(), job.completionTime()):.2f} s, "
            f"{job.status()}, {job.numTasks()} tasks, stages {stages}"
        )
        for stage_id in stages:
            try:
                s = store.lastStageAttempt(stage_id)
            except Exception:  # noqa: BLE001 (a stage the store no longer holds)
                continue
            print(
                f"    stage {stage_id}: {str(s.status()).lower()}, {s.numTasks()} tasks, "
                f"wall {_seconds(s.submissionTime(), s.completionTime()):.2f} s, "
                f"run {s.executorRunTime() / 1000:.2f} s, cpu {s.executorCpuTime() / 1e9:.2f} s, "
                f"gc {s.jvmGcTime() / 1000:.2f} s, in {s.inputRecords():,} rows, "
                f"shuffle write {s.shuffleWriteBytes() / 2**20:.1f} MiB, "
                f"shuffle read {s.shuffleReadRecords():,} rows, out {s.outputRecords():,} rows"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--articles", type=int, default=1000)
    parser.add_argument("--dir", default=None, help="where the temporary data folder goes")
    parser.add_argument("--top", type=int, default=15, help="cProfile lines shown")
    args = parser.parse_args(argv)
    spark = create_spark_session("local[*]")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        s = Scheduler(folder / "data", lambda: spark, flush_interval=3600)
        s.start()
        try:
            s.install(PROGRAM)
            titles = [{"id": ("int", i), "title": ("string", f"a{i}")} for i in range(1, args.articles + 1)]
            s.write([("article", titles, [])])
            path = folder / "votes.parquet"
            for n in (max(1000, args.rows // 10), args.rows):
                ids = np.arange(-n, 0, dtype=np.int64)
                pq.write_table(pa.table({"article_id": ids % args.articles + 1, "user_id": ids}), path)
                if n != args.rows:
                    s.load("vote", str(path))
            store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
            before = set(_jobs(store))
            phases: list[tuple[str, float]] = []

            def progress(p: Progress) -> None:
                if not phases or phases[-1][0] != p.phase:
                    phases.append((p.phase, time.perf_counter()))

            profile = cProfile.Profile()
            t0 = time.perf_counter()
            profile.enable()
            rows, _ = s.load("vote", str(path), progress=progress)
            profile.disable()
            t1 = time.perf_counter()
        finally:
            s.stop()
        marks = [*phases, ("", t1)]
        spans = ", ".join(f"{a[0]} {b[1] - a[1]:.2f} s" for a, b in zip(marks, marks[1:], strict=False))
        print(f"load: {rows:,} rows in {t1 - t0:.2f} s = {rows / (t1 - t0):,.0f} rows/s; phases: {spans}")
        after = _jobs(store)
        report_spark(store, [after[j] for j in sorted(set(after) - before)])
        pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
