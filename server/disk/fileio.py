"""The one file interface of the write-ahead log and of a local store.

Everything `wal.WriteAheadLog` and `store.fs.LocalFS` do to files and folders goes through a
`FileIO`: creating, appending, truncating and fsyncing a file, fsyncing a folder, listing,
renaming and deleting. Production uses `OS_FILES` (plain `os` calls); the power-cut tests put a
recording layer in its place (tests/server/crash_fs.py) that can compute what a power cut at any
point would leave on disk, so that production and tests run the same code.

Paths are strings or `os.PathLike`, absolute or relative to the working folder, in the local
file system's notation.
"""

from __future__ import annotations

import os
import shutil
from abc import ABC, abstractmethod
from dataclasses import dataclass

from pomoview.server.disk.fsync import fsync_path

StrPath = str | os.PathLike[str]


@dataclass(frozen=True)
class DirEntry:
    """A folder entry: its name (not its path) and whether it is a folder."""

    name: str
    is_dir: bool


class LogFile(ABC):
    """An open file that is only appended to, truncated and fsynced."""

    @abstractmethod
    def write(self, data: bytes) -> None:
        """Append all of `data`; on an error, part of it may have been written."""

    @abstractmethod
    def fsync(self) -> None:
        """Make the file's data durable (not its name: fsync its folder for that)."""

    @abstractmethod
    def truncate(self, size: int) -> None: ...

    @abstractmethod
    def close(self) -> None: ...


class FileIO(ABC):
    """File and folder operations; none of them makes anything durable but the fsyncs."""

    @abstractmethod
    def create(self, path: StrPath) -> LogFile:
        """A new, empty file open for appending; FileExistsError if the name exists."""

    @abstractmethod
    def open_existing(self, path: StrPath) -> LogFile:
        """An existing file, open for appending and truncating."""

    @abstractmethod
    def read_bytes(self, path: StrPath) -> bytes: ...

    @abstractmethod
    def list_dir(self, path: StrPath) -> list[DirEntry]:
        """The entries of a folder, sorted by name; FileNotFoundError if there is none."""

    @abstractmethod
    def exists(self, path: StrPath) -> bool: ...

    @abstractmethod
    def is_dir(self, path: StrPath) -> bool: ...

    @abstractmethod
    def makedirs(self, path: StrPath) -> None:
        """Create a folder and its parents; nothing if it exists."""

    @abstractmethod
    def unlink(self, path: StrPath) -> None:
        """Remove a file's name; FileNotFoundError if it has none."""

    @abstractmethod
    def rename(self, src: StrPath, dst: StrPath) -> None:
        """Move `src` to `dst` atomically, replacing `dst` if it is a file."""

    @abstractmethod
    def delete_tree(self, path: StrPath) -> None:
        """Delete a file or a folder with everything under it; nothing if it does not exist."""

    @abstractmethod
    def fsync_path(self, path: StrPath) -> None:
        """fsync a file or a folder by path: a folder's fsync makes its entries durable (new
        names, renames into it, removals)."""

    def makedirs_durably(self, path: StrPath) -> None:
        """`makedirs`, then fsync the parent of every folder it created, deepest first: a new
        folder's name is durable only once its parent is synced, and everything acknowledged
        inside it would vanish with it."""
        missing: list[str] = []
        at = os.path.abspath(path)
        while not self.exists(at):
            missing.append(at)
            parent = os.path.dirname(at)
            if parent == at:
                break
            at = parent
        self.makedirs(path)
        for folder in missing:
            self.fsync_path(os.path.dirname(folder))


class _OsLogFile(LogFile):
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def fsync(self) -> None:
        os.fsync(self._fd)

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def close(self) -> None:
        os.close(self._fd)


class OsFileIO(FileIO):
    """The local file system, through `os`."""

    def create(self, path: StrPath) -> LogFile:
        return _OsLogFile(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644))

    def open_existing(self, path: StrPath) -> LogFile:
        return _OsLogFile(os.open(path, os.O_WRONLY | os.O_APPEND))

    def read_bytes(self, path: StrPath) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def list_dir(self, path: StrPath) -> list[DirEntry]:
        with os.scandir(path) as entries:
            return sorted((DirEntry(e.name, e.is_dir()) for e in entries), key=lambda e: e.name)

    def exists(self, path: StrPath) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: StrPath) -> bool:
        return os.path.isdir(path)

    def makedirs(self, path: StrPath) -> None:
        os.makedirs(path, exist_ok=True)

    def unlink(self, path: StrPath) -> None:
        os.unlink(path)

    def rename(self, src: StrPath, dst: StrPath) -> None:
        os.replace(src, dst)

    def delete_tree(self, path: StrPath) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def fsync_path(self, path: StrPath) -> None:
        fsync_path(path)


OS_FILES: FileIO = OsFileIO()
