"""The power-cut layer's model (crash_fs.py), checked case by case against its docstring."""

from __future__ import annotations

from pathlib import Path

from .crash_fs import VARIANTS, CrashFS, Tree, cut_states, materialize, tear


def final_states(fs: CrashFS) -> dict[str, Tree]:
    """Each variant's state after the whole trace, by variant name."""
    last = len(fs.trace)
    return {s.variant: s.tree for s in cut_states(fs.trace, VARIANTS, dedupe=False) if s.cut == last}


def test_written_data_is_durable_only_after_the_file_fsync(tmp_path: Path) -> None:
    fs = CrashFS(tmp_path / "disk")
    fs.fsync_path(fs.root)
    f = fs.create(tmp_path / "disk" / "a")
    fs.fsync_path(fs.root)
    f.write(b"one")
    f.fsync()
    f.write(b"two")
    states = final_states(fs)
    assert states["durable only"] == {"a": b"one"}
    assert states["as the process saw it"] == {"a": b"onetwo"}
    f.fsync()
    f.close()
    assert final_states(fs)["durable only"] == {"a": b"onetwo"}


def test_names_are_durable_only_after_the_folder_fsync(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    fs = CrashFS(disk)
    fs.makedirs(disk / "d")  # its parent is synced by nobody
    f = fs.create(disk / "d" / "x")
    f.write(b"data")
    f.fsync()
    f.close()
    fs.fsync_path(disk / "d")
    assert final_states(fs)["durable only"] == {}  # the folder's own name never was durable
    fs.fsync_path(disk)
    assert final_states(fs)["durable only"] == {"d": {"x": b"data"}}
    fs.unlink(disk / "d" / "x")
    assert final_states(fs)["durable only"] == {"d": {"x": b"data"}}
    fs.fsync_path(disk / "d")
    assert final_states(fs)["durable only"] == {"d": {}}


def test_a_rename_is_atomic_and_durable_with_its_folder(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    fs = CrashFS(disk)
    for name, content in (("m", b"old"), ("t", b"new")):
        f = fs.create(disk / name)
        f.write(content)
        f.fsync()
        f.close()
    fs.fsync_path(disk)
    durable = len(fs.trace)  # both files complete and named durably from here on
    fs.rename(disk / "t", disk / "m")
    states = final_states(fs)
    assert states["durable only"] == {"m": b"old", "t": b"new"}
    assert states["as the process saw it"] == {"m": b"new"}
    # Every cut point and variant: `m` is the old or the new file, never absent or mixed.
    checked = 0
    for state in cut_states(fs.trace, VARIANTS, dedupe=False):
        if state.cut >= durable:
            assert state.tree.get("m") in (b"old", b"new"), state
            checked += 1
    assert checked == 2 * len(VARIANTS)


def test_a_name_can_survive_without_its_data(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    fs = CrashFS(disk)
    f = fs.create(disk / "manifest")
    f.write(b"{}")
    f.close()
    fs.fsync_path(disk)  # the name is durable, the data is not
    assert final_states(fs)["durable only"] == {"manifest": b""}


def test_files_written_outside_the_layer_enter_it_undurable(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    fs = CrashFS(disk)
    fs.makedirs(disk / "tmp")
    fs.fsync_path(disk)
    (disk / "tmp" / "spark.parquet").write_bytes(b"PAR1")  # as Spark writes
    assert [e.name for e in fs.list_dir(disk / "tmp")] == ["spark.parquet"]
    assert final_states(fs)["durable only"] == {"tmp": {}}
    fs.fsync_path(disk / "tmp")
    assert final_states(fs)["durable only"] == {"tmp": {"spark.parquet": b""}}
    fs.fsync_path(disk / "tmp" / "spark.parquet")
    assert final_states(fs)["durable only"] == {"tmp": {"spark.parquet": b"PAR1"}}
    fs.delete_tree(disk / "tmp")
    assert final_states(fs)["as the process saw it"] == {}
    assert final_states(fs)["durable only"] == {"tmp": {"spark.parquet": b"PAR1"}}


def test_tearing_at_sector_boundaries() -> None:
    durable = b"a" * 700
    current = durable + b"b" * 5000  # the unsynced region starts inside sector 1 of 512
    assert tear(durable, current, 512, "first") == current[:1024]
    assert tear(durable, current, 512, "last") == current[: 5700 - 5700 % 512]
    hole = tear(durable, current, 512, "hole")
    assert len(hole) == len(current)
    assert hole[:700] == durable and hole[700:1024] == b"\0" * 324 and hole[1024:] == current[1024:]
    assert tear(durable, current, 4096, "first") == current[:4096]
    assert tear(durable, current, 4096, "last") == current[:4096]
    assert tear(durable, durable[:100], 512, "first") == durable  # a truncation is whole or not
    assert tear(durable, durable, 4096, "hole") == durable


def test_materialize_writes_the_tree(tmp_path: Path) -> None:
    materialize({"a": b"1", "d": {"b": b"2", "e": {}}}, tmp_path / "out")
    assert (tmp_path / "out" / "a").read_bytes() == b"1"
    assert (tmp_path / "out" / "d" / "b").read_bytes() == b"2"
    assert (tmp_path / "out" / "d" / "e").is_dir()
