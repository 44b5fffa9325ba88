"""A file layer that records what the write-ahead log and the local store do to the disk, and
computes what a power cut at any point of it would leave (after SQLite's test VFS and ALICE).

`CrashFS` is a `FileIO` (server/fileio.py), the interface the log and `LocalFS` use in
production too. Every call is done on the real disk, so that Spark reads what the store wrote
and the store moves what Spark wrote, and is recorded in `trace`. `cut_states` replays a
prefix of the trace on an in-memory model and yields the states a power cut there may leave;
`materialize` writes one into a folder, where the real code recovers from it.

The model of durability, POSIX as weak as it allows
---------------------------------------------------

- **File data.** What was written to a file is durable only once the file is fsynced. At a
  cut, what was written since the file's last fsync is dropped, or kept, or torn at a sector
  boundary (512 B or 4 KiB): only the first changed sector reached the disk ("first"), all
  but the last partial sector ("last"), or the file's size reached the disk but its first
  changed sector did not ("hole": that sector keeps its old content, zeros past the old end).
  A truncation since the last fsync is kept or dropped whole.
- **Folder entries.** Creating a name (file or folder), removing one, and renaming within a
  folder are durable only once that folder is fsynced. At a cut, a prefix of the folder's
  entry changes since its last fsync survives, in order: none, some or all, each folder on its
  own. A folder that survives in no surviving entry is lost with all it holds, whatever was
  fsynced in it.
- **Rename.** Within one folder a rename is one change: atomic, the new name shows the old
  file or the renamed one, never neither. Between folders it is two changes (the new name in
  the destination, the removal from the source), each durable with its own folder's fsync:
  more adversarial than a journaling file system, where they go together.
- **Independence.** A file's data and its names are durable separately: a name can survive
  with no data (an empty manifest under the manifest's name), data with no name (lost).
- **Files the layer did not create** (Spark's Parquet files and folders) enter the model when
  the layer first meets them (a listing, an fsync, a rename, a delete), as created at that
  moment with the content they have then, none of it durable. Spark's own writes before that
  are not cut points; nothing of them can be durable before an fsync through the layer
  anyway, and they live in a temporary folder no manifest lists.
- Reads are not recorded. `note` puts a marker in the trace (the tests mark each
  acknowledged write), so that a cut knows what had been acknowledged before it.

A cut point is the moment before an operation of the trace (or after the last one). The
states yielded per cut point are named variants (`VARIANTS`: the durable state only, the
state the process saw, names without data, and the torn ones), or random choices of prefix and
tearing per folder and file (`RandomChoice`), deduplicated.

`lie` makes chosen fsyncs do nothing, to show that the tests catch a missing fsync.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from pomoview.server.disk.fileio import OS_FILES, DirEntry, FileIO, LogFile, StrPath

# An operation of the trace: a tuple whose first item says what it is (`Model.apply`).
Op = tuple[Any, ...]
# A state on disk: file name -> content, folder name -> its tree.
Tree = dict[str, Union[bytes, "Tree"]]
ROOT = 0


@dataclass(eq=False)
class _File:
    data: bytearray
    durable: bytes


@dataclass(eq=False)
class _Dir:
    entries: dict[str, int] = field(default_factory=dict)  # name -> node, as the process sees it
    durable: dict[str, int] = field(default_factory=dict)  # as of the folder's last fsync
    pending: list[Op] = field(default_factory=list)  # entry changes since then, in order


def _apply_entry(entries: dict[str, int], change: Op) -> None:
    kind = change[0]
    if kind == "link":
        entries[change[1]] = change[2]
    elif kind == "unlink":
        entries.pop(change[1], None)
    else:  # "move" within the folder
        node = entries.pop(change[1], None)
        if node is not None:
            entries[change[2]] = node


class Choice:
    """What survives a cut: per folder, how many of its pending entry changes; per file, its
    content given its durable and its current bytes."""

    def prefix(self, pending: Sequence[Op]) -> int:
        raise NotImplementedError

    def content(self, durable: bytes, current: bytes) -> bytes:
        raise NotImplementedError


def tear(durable: bytes, current: bytes, sector: int, how: str) -> bytes:
    """The file after a cut that tore the writes since its last fsync (module docstring)."""
    if durable == current:
        return durable
    p = 0
    limit = min(len(durable), len(current))
    while p < limit and durable[p] == current[p]:
        p += 1
    if p >= len(current):  # a truncation: whole or not at all
        return current if how == "last" else durable
    a = p - p % sector
    first_end = min(len(current), a + sector)
    if how == "first":
        return current[:first_end] + durable[first_end:]
    if how == "last":
        end = len(current) - len(current) % sector
        return durable if end <= p else current[:end] + durable[end:]
    assert how == "hole"
    old = durable[a:first_end].ljust(first_end - a, b"\0")
    return current[:a] + old + current[first_end:]


@dataclass(frozen=True)
class Variant(Choice):
    name: str
    names: bool  # every pending entry change survives (else none)
    data: str  # "durable", "current", or "<how>-<sector>" for `tear`

    def prefix(self, pending: Sequence[Op]) -> int:
        return len(pending) if self.names else 0

    def content(self, durable: bytes, current: bytes) -> bytes:
        if self.data == "durable":
            return durable
        if self.data == "current":
            return current
        how, sector = self.data.split("-")
        return tear(durable, current, int(sector), how)


VARIANTS: tuple[Variant, ...] = (
    Variant("durable only", names=False, data="durable"),
    Variant("as the process saw it", names=True, data="current"),
    Variant("names without data", names=True, data="durable"),
    *(
        Variant(f"torn {how} {sector}", names=True, data=f"{how}-{sector}")
        for sector in (512, 4096)
        for how in ("first", "last", "hole")
    ),
)


class RandomChoice(Choice):
    """A random prefix per folder and a random fate per file (drop, keep, or a tear)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.name = "random"

    def prefix(self, pending: Sequence[Op]) -> int:
        return self.rng.randint(0, len(pending))

    def content(self, durable: bytes, current: bytes) -> bytes:
        fate = self.rng.choice(["durable", "current", "first", "last", "hole"])
        if fate == "durable":
            return durable
        if fate == "current":
            return current
        return tear(durable, current, self.rng.choice([512, 4096]), fate)


class Model:
    """Folders and files with what is durable of them; `apply` plays one traced operation."""

    def __init__(self) -> None:
        self.nodes: dict[int, _File | _Dir] = {ROOT: _Dir()}

    def dir(self, node: int) -> _Dir:
        d = self.nodes[node]
        assert isinstance(d, _Dir), node
        return d

    def file(self, node: int) -> _File:
        f = self.nodes[node]
        assert isinstance(f, _File), node
        return f

    def apply(self, op: Op) -> None:
        kind = op[0]
        if kind == "dir":
            self.nodes[op[1]] = _Dir()
        elif kind == "file":
            self.nodes[op[1]] = _File(bytearray(op[2]), b"")
        elif kind in ("link", "unlink", "move"):
            d = self.dir(op[1])
            change = op[:1] + op[2:]
            _apply_entry(d.entries, change)
            d.pending.append(change)
        elif kind == "xmove":  # between folders: two changes (module docstring)
            _, src_dir, src, dst_dir, dst = op
            node = self.dir(src_dir).entries[src]
            self.apply(("unlink", src_dir, src))
            self.apply(("link", dst_dir, dst, node))
        elif kind == "write":
            self.file(op[1]).data += op[2]
        elif kind == "truncate":
            f = self.file(op[1])
            del f.data[op[2] :]
            f.data.extend(b"\0" * (op[2] - len(f.data)))
        elif kind == "fsync":
            node = self.nodes[op[1]]
            if isinstance(node, _Dir):
                node.durable = dict(node.entries)
                node.pending = []
            else:
                node.durable = bytes(node.data)
        else:
            assert kind == "note", op

    def crash(self, choice: Choice) -> Tree:
        """The tree a power cut now may leave, as `choice` decides what survives."""
        # Each node decides once, even if it shows under two names.
        decided: dict[int, Any] = {}

        def view(node_id: int) -> bytes | Tree:
            if node_id in decided:
                return decided[node_id]  # type: ignore[no-any-return]
            node = self.nodes[node_id]
            out: bytes | Tree
            if isinstance(node, _File):
                out = choice.content(node.durable, bytes(node.data))
            else:
                entries = dict(node.durable)
                for change in node.pending[: choice.prefix(node.pending)]:
                    _apply_entry(entries, change)
                decided[node_id] = {}  # a folder inside itself cannot happen; stop if it did
                out = {name: view(child) for name, child in sorted(entries.items())}
            decided[node_id] = out
            return out

        tree = view(ROOT)
        assert isinstance(tree, dict)
        return tree


def fingerprint(tree: Tree) -> str:
    digest = hashlib.sha256()

    def walk(t: Tree, prefix: str) -> None:
        for name, value in sorted(t.items()):
            if isinstance(value, bytes):
                digest.update(f"F{prefix}/{name}:{len(value)}:".encode())
                digest.update(value)
            else:
                digest.update(f"D{prefix}/{name};".encode())
                walk(value, f"{prefix}/{name}")

    walk(tree, "")
    return digest.hexdigest()


def materialize(tree: Tree, where: Path) -> None:
    """Write `tree` into the folder `where` (emptied first), for the real code to recover."""
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for name, value in tree.items():
        if isinstance(value, bytes):
            (where / name).write_bytes(value)
        else:
            materialize(value, where / name)


@dataclass(frozen=True)
class CutState:
    cut: int  # operations of the trace done before the cut
    variant: str
    notes: tuple[Any, ...]  # what `note` marked before the cut
    tree: Tree


def cut_points(trace: Sequence[Op]) -> list[int]:
    """The cut points of a trace: before each file operation, and after the last one."""
    return [i for i, op in enumerate(trace) if op[0] != "note"] + [len(trace)]


def cut_states(
    trace: Sequence[Op], choices: Sequence[Choice] = VARIANTS, *, dedupe: bool = True
) -> Iterator[CutState]:
    """Every distinct state a cut at each cut point may leave, under each of `choices`."""
    model = Model()
    notes: list[Any] = []
    seen: set[tuple[str, tuple[Any, ...]]] = set()
    points = set(cut_points(trace))
    for i in range(len(trace) + 1):
        if i in points:
            for choice in choices:
                tree = model.crash(choice)
                key = (fingerprint(tree), tuple(notes))
                if dedupe and key in seen:
                    continue
                seen.add(key)
                yield CutState(i, getattr(choice, "name", type(choice).__name__), tuple(notes), tree)
        if i < len(trace):
            op = trace[i]
            if op[0] == "note":
                notes.append(op[1])
            model.apply(op)


class _CrashFile(LogFile):
    def __init__(self, fs: CrashFS, node: int, path: str, real: LogFile) -> None:
        self._fs, self._node, self._path, self._real = fs, node, path, real

    def write(self, data: bytes) -> None:
        with self._fs._lock:
            self._real.write(data)
            self._fs._record(("write", self._node, bytes(data)))

    def fsync(self) -> None:
        self._fs._fsync(self._node, self._path)

    def truncate(self, size: int) -> None:
        with self._fs._lock:
            self._real.truncate(size)
            self._fs._record(("truncate", self._node, size))

    def close(self) -> None:
        self._real.close()


class CrashFS(FileIO):
    """The real disk under `root`, recorded into `trace` (module docstring).

    Paths must lie under `root`, which starts empty and durable. Real fsyncs are skipped (the
    model decides what is durable); each takes `fsync_delay` seconds instead, outside the
    lock, as a disk's would, so that concurrent writers share group commits. `lie(path,
    is_dir, trace)` True makes that fsync do nothing at all.
    """

    def __init__(
        self,
        root: Path,
        *,
        fsync_delay: float = 0.0,
        lie: Callable[[str, bool, Sequence[Op]], bool] | None = None,
    ) -> None:
        self.root = str(root.absolute())
        os.makedirs(self.root, exist_ok=True)
        assert not os.listdir(self.root), "CrashFS starts from an empty folder"
        self.trace: list[Op] = []
        self.paths: dict[int, str] = {ROOT: self.root}  # where each node was first met
        self._model = Model()
        self._next_id = ROOT + 1
        self._lock = threading.RLock()
        self._fsync_delay = fsync_delay
        self._lie = lie
        self._real = OS_FILES

    # --- recording -------------------------------------------------------------------------

    def _record(self, op: Op) -> None:
        self.trace.append(op)
        self._model.apply(op)

    def note(self, what: Any) -> None:
        """Mark the trace: a cut after this point knows `what` happened."""
        with self._lock:
            self._record(("note", what))

    def _new(self, kind: str, path: str, content: bytes = b"") -> int:
        node = self._next_id
        self._next_id += 1
        self.paths[node] = path
        self._record(("dir", node) if kind == "dir" else ("file", node, content))
        return node

    def _parts(self, path: StrPath) -> list[str]:
        rel = os.path.relpath(os.path.abspath(path), self.root)
        assert not rel.startswith(".."), f"{path} is not under {self.root}"
        return [] if rel == "." else rel.split(os.sep)

    def _real_path(self, parts: Sequence[str]) -> str:
        return os.path.join(self.root, *parts)

    def _lookup(self, parts: Sequence[str]) -> int | None:
        """The node at `parts`, taking into the model what exists on disk but not in it."""
        node = ROOT
        for depth, name in enumerate(parts):
            d = self._model.dir(node)
            child = d.entries.get(name)
            if child is None:
                real = self._real_path(parts[: depth + 1])
                if os.path.isdir(real):
                    child = self._new("dir", real)
                elif os.path.isfile(real):
                    child = self._new("file", real, self._real.read_bytes(real))
                else:
                    return None
                self._record(("link", node, name, child))
            node = child
        return node

    def _sync_listing(self, parts: Sequence[str]) -> int:
        """Make the model's entries of a folder those on disk (Spark adds and removes some)."""
        node = self._lookup(parts)
        assert node is not None, parts
        real = self._real_path(parts)
        on_disk = {e.name for e in self._real.list_dir(real)}
        d = self._model.dir(node)
        for name in sorted(set(d.entries) - on_disk):
            self._record(("unlink", node, name))
        for name in sorted(on_disk - set(d.entries)):
            self._lookup([*parts, name])
        return node

    def _fsync(self, node: int, path: str) -> None:
        with self._lock:
            is_dir = isinstance(self._model.nodes[node], _Dir)
            if self._lie is not None and self._lie(path, is_dir, self.trace):
                return
            self._record(("fsync", node))
        if self._fsync_delay:
            time.sleep(self._fsync_delay)

    def describe(self, op: Op) -> str:
        """An operation of the trace, with paths for node numbers."""
        kind = op[0]
        if kind in ("write", "truncate", "fsync", "dir", "file"):
            extra = {"write": lambda: f" of {len(op[2])} bytes", "truncate": lambda: f" to {op[2]}"}
            return f"{kind} {self.paths.get(op[1], op[1])}{extra.get(kind, str)()}"
        if kind in ("link", "unlink", "move", "xmove"):
            where = self.paths.get(op[1], op[1])
            return f"{kind} {' '.join(str(x) for x in op[2:] if isinstance(x, str))} in {where}"
        return repr(op)

    # --- FileIO ------------------------------------------------------------------------------

    def create(self, path: StrPath) -> LogFile:
        parts = self._parts(path)
        with self._lock:
            parent = self._lookup(parts[:-1])
            assert parent is not None, path
            real = self._real.create(path)
            node = self._new("file", os.fspath(path))
            self._record(("link", parent, parts[-1], node))
        return _CrashFile(self, node, os.fspath(path), real)

    def open_existing(self, path: StrPath) -> LogFile:
        with self._lock:
            node = self._lookup(self._parts(path))
            real = self._real.open_existing(path)
        assert node is not None
        return _CrashFile(self, node, os.fspath(path), real)

    def read_bytes(self, path: StrPath) -> bytes:
        return self._real.read_bytes(path)

    def list_dir(self, path: StrPath) -> list[DirEntry]:
        with self._lock:
            entries = self._real.list_dir(path)
            self._sync_listing(self._parts(path))
        return entries

    def exists(self, path: StrPath) -> bool:
        return self._real.exists(path)

    def is_dir(self, path: StrPath) -> bool:
        return self._real.is_dir(path)

    def makedirs(self, path: StrPath) -> None:
        parts = self._parts(path)
        with self._lock:
            for depth in range(1, len(parts) + 1):
                if self._lookup(parts[:depth]) is None:
                    os.mkdir(self._real_path(parts[:depth]))
                    parent = self._lookup(parts[: depth - 1])
                    assert parent is not None
                    made = self._new("dir", self._real_path(parts[:depth]))
                    self._record(("link", parent, parts[depth - 1], made))

    def unlink(self, path: StrPath) -> None:
        parts = self._parts(path)
        with self._lock:
            parent = self._lookup(parts[:-1])
            self._real.unlink(path)
            self._record(("unlink", parent, parts[-1]))

    def rename(self, src: StrPath, dst: StrPath) -> None:
        s, t = self._parts(src), self._parts(dst)
        with self._lock:
            assert self._lookup(s) is not None, src
            src_dir, dst_dir = self._lookup(s[:-1]), self._lookup(t[:-1])
            self._real.rename(src, dst)
            if src_dir == dst_dir:
                self._record(("move", src_dir, s[-1], t[-1]))
            else:
                self._record(("xmove", src_dir, s[-1], dst_dir, t[-1]))

    def delete_tree(self, path: StrPath) -> None:
        with self._lock:
            self._delete(self._parts(path))

    def _delete(self, parts: list[str]) -> None:
        """As `shutil.rmtree` does it: what a folder holds first, one name at a time."""
        node = self._lookup(parts)
        if node is None:
            return
        if isinstance(self._model.nodes[node], _Dir):
            self._sync_listing(parts)
            for name in sorted(self._model.dir(node).entries):
                self._delete([*parts, name])
            os.rmdir(self._real_path(parts))
        else:
            os.unlink(self._real_path(parts))
        parent = self._lookup(parts[:-1])
        self._record(("unlink", parent, parts[-1]))

    def fsync_path(self, path: StrPath) -> None:
        parts = self._parts(path)
        with self._lock:
            node = self._lookup(parts)
            assert node is not None, path
            if isinstance(self._model.nodes[node], _Dir):
                self._sync_listing(parts)
        self._fsync(node, os.fspath(path))
