"""Spark failures end to end: a failed keyed job and a dead JVM give UNAVAILABLE with a reason,
fill nothing, and the next lookups retry until Spark answers again (a new JVM, if it died)."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pomoview.client import Client, Unavailable

from .server_process import VOTES, ServerProcess, wait_for_flush
from .votes_model import VotesModel

VIEW = "articleWithVotes"


def _proc_stat(pid: int) -> tuple[str, str, int] | None:
    """(command name, state, parent pid) of a process, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = stat[stat.index("(") + 1 : stat.rindex(")")]  # the name may hold spaces and parens
    state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
    return name, state, int(ppid)


def jvm_children(pid: int) -> list[int]:
    """The live (not zombie) java processes whose parent is `pid`: the server's Spark driver."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None and stat[0] == "java" and stat[1] != "Z" and stat[2] == pid:
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def votes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """This module's own: its tests corrupt the store and kill the JVM of the server they use."""
    data = Path(tmp_path_factory.mktemp("spark-failure")) / "data"
    server = ServerProcess(data, program=VOTES).start()
    yield server
    server.stop()


def _populate(db: Client, model: VotesModel, ids: range) -> int:
    articles = [{"id": i, "title": f"article {i}"} for i in ids]
    db.write("article", insert=articles)
    model.apply("article", articles, [])
    votes = [{"article_id": i, "user_id": u} for i in ids for u in range(i % 4)]
    epoch = db.write("vote", insert=votes)
    model.apply("vote", votes, [])
    wait_for_flush(db, epoch)  # cold keys now need a keyed Spark job over Parquet
    return epoch


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_a_failed_spark_job_is_unavailable_until_the_store_reads_again(
    votes_server: ServerProcess, tmp_path: Path
) -> None:
    model = VotesModel()
    assert votes_server.process is not None
    with votes_server.client() as db:
        epoch = _populate(db, model, range(100, 110))
        assert db.lookup(VIEW, {"id": 100}, min_epoch=epoch) == model.view(100)  # warm now
        jvm = jvm_children(votes_server.process.pid)
        # Corrupt every Parquet file of `vote` (keeping copies): jobs over it fail in Spark.
        files = sorted((votes_server.data_dir / "store" / "vote").glob("part-*/*.parquet"))
        assert files
        copies = []
        for i, f in enumerate(files):
            copies.append(tmp_path / f"{i}.parquet")
            shutil.copyfile(f, copies[-1])
            f.write_bytes(b"not parquet " * (f.stat().st_size // 12 + 1))
        try:
            for _ in range(2):  # each lookup runs the job again, and fails again
                jobs = db.stats()["spark_jobs"]
                with pytest.raises(Unavailable) as failed:
                    db.lookup(VIEW, {"id": 101})
                message = str(failed.value)
                assert "upquery on source 'vote' failed in Spark" in message, message
                assert "vote/part-" in message, message  # the reason names the file
                assert db.stats()["spark_jobs"] > jobs  # type: ignore[operator]
            assert db.lookup(VIEW, {"id": 100}) == model.view(100)  # warm keys still answer
        finally:
            for f, copy in zip(files, copies, strict=True):
                shutil.copyfile(copy, f)
        assert db.lookup(VIEW, {"id": 101}) == model.view(101)
        assert [db.lookup(VIEW, {"id": i}) for i in range(100, 110)] == [
            model.view(i) for i in range(100, 110)
        ]
        # The session was healthy all along: the failure did not restart the JVM.
        assert jvm_children(votes_server.process.pid) == jvm


@pytest.mark.slow  # the suite's 10 minutes: run with -m slow
def test_after_the_jvm_dies_lookups_are_unavailable_then_a_new_session_answers(
    votes_server: ServerProcess,
) -> None:
    model = VotesModel()
    assert votes_server.process is not None
    server_pid = votes_server.process.pid
    warm = range(200, 205)
    with votes_server.client() as db:
        epoch = _populate(db, model, range(200, 210))
        for i in warm:
            assert db.lookup(VIEW, {"id": i}, min_epoch=epoch) == model.view(i)
        (jvm,) = jvm_children(server_pid)
        os.kill(jvm, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while jvm in jvm_children(server_pid):  # until it is gone (or a zombie)
            assert time.monotonic() < deadline, "the JVM did not die"
            time.sleep(0.05)

        # Warm keys are answered from the dataflow's state, without Spark, throughout.
        stop = threading.Event()
        warm_answers: list[int] = []
        warm_errors: list[str] = []

        def read_warm() -> None:
            with votes_server.client() as reader:
                while not stop.is_set():
                    for i in warm:
                        try:
                            got = reader.lookup(VIEW, {"id": i})
                        except Exception as err:  # noqa: BLE001 (reported below)
                            warm_errors.append(f"{i}: {type(err).__name__}: {err}")
                            continue
                        if got != model.view(i):
                            warm_errors.append(f"{i}: {got} != {model.view(i)}")
                        warm_answers.append(i)
                    time.sleep(0.05)

        reader = threading.Thread(target=read_warm, daemon=True)
        reader.start()
        try:
            # Nothing else uses Spark now (everything is flushed), so this lookup is the one that
            # finds the JVM dead.
            with pytest.raises(Unavailable) as failed:
                db.lookup(VIEW, {"id": 205})
            message = str(failed.value)
            assert "Spark session died" in message, message
            assert "exited with status -9" in message, message
            assert "'article'" in message or "'vote'" in message, message

            # A write is accepted meanwhile (the log does not need Spark).
            vote = {"article_id": 205, "user_id": 999}
            epoch = db.write("vote", insert=[vote])
            model.apply("vote", [vote], [])

            deadline = time.monotonic() + 90
            while True:
                try:
                    got = db.lookup(VIEW, {"id": 205}, min_epoch=epoch)
                    break
                except Unavailable as err:
                    assert time.monotonic() < deadline, f"no new Spark session: {err}"
                    time.sleep(0.5)
            assert got == model.view(205)
            for i in range(205, 210):
                assert db.lookup(VIEW, {"id": i}) == model.view(i)
            wait_for_flush(db, epoch)  # the flusher writes Parquet again
        finally:
            stop.set()
            reader.join(30)
        assert not warm_errors, warm_errors[:5]
        assert len(warm_answers) >= len(warm)
        new_jvms = jvm_children(server_pid)
        assert len(new_jvms) == 1 and new_jvms[0] != jvm
