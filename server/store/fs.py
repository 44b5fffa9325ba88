"""The file operations of the Parquet source store, on a local folder or on any file system
Hadoop knows (DESIGN §4: "a shared filesystem or object store; nothing else changes").

Spark reads and writes the Parquet files itself; everything else the store does to its
location goes through a `StoreFS`: the manifest, listing folders, moving the files Spark
wrote into place, deleting trees, and making all of that durable where the file system can.

- `LocalFS`: a local folder, through a `fileio.FileIO` (`os`/`shutil` in production, a
  power-cut simulating layer in tests). Files and folders are fsynced (Spark's local file
  system never fsyncs), and the manifest is replaced with an atomic rename.
- `HadoopFS`: any URI the Spark JVM's Hadoop `FileSystem` knows (hdfs://, s3a://, abfs://,
  gs:// given the jars, file:), through py4j, with the session's Hadoop configuration.

`open_store_fs(location, spark)` picks one: a plain path or a file:// URI is a `LocalFS`; any
other URI a `HadoopFS`. A `hadoop+` prefix (`hadoop+file:///srv/store`) forces a URI through
Hadoop's client, for a local folder too: that is how the tests run the Hadoop code path
without a cluster.

Replacing the manifest atomically
---------------------------------

The store's one truth is its manifest: a new one must appear whole or not at all, must never
be lost, and must be durable before the call returns.

`LocalFS` writes `manifest.json` beside it under a temporary name, fsyncs it, `os.replace`s
it over the old one (atomic on POSIX) and fsyncs the folder.

`HadoopFS` cannot do that in general. Hadoop's `rename` refuses to replace an existing file
(the overwriting rename is not public API), so replacing would be delete-then-rename, and a
crash in between leaves no manifest at all: the store would look empty while the write-ahead
log has been trimmed behind it. On object stores (S3A, GCS, ABFS without hierarchical
namespace) a rename is moreover a copy and a delete, not atomic. So `HadoopFS` never
replaces a file. Each publication writes a new file, `manifest-<seq>.json` (`seq` counts
publications, 20 digits), with `create(overwrite=false)`, and the manifest is the valid one of
the highest `seq`, found by listing the root:

- Object stores make an object visible only when its upload completes (at `close`), so a new
  manifest is whole or absent. Listing is strongly consistent on S3, GCS and ABFS.
- HDFS (and a local file system) may show a file being written, so a crash mid-write can
  leave a truncated manifest. A truncated JSON object never parses, so discovery skips a
  manifest that does not parse and takes the previous one: a manifest whose write had not
  returned was never acknowledged, and the log still holds what it would have added. Only a
  parse failure counts as incomplete: an error while reading (a network error, HDFS's
  "cannot obtain block length" before lease recovery) fails the open instead, since falling
  back then could resurrect an old state.
- `create(overwrite=false)` is an atomic check-and-create on HDFS, so a second server
  writing to the same store fails its publication instead of overwriting. On S3A the check is
  not atomic (one store per location at a time is the rule anyway, see `SourceStore`).
- The stream is `hsync`ed before `close` where it has the capability (HDFS: on the datanodes'
  disks); `close` is where an object store's upload happens.
- Once a new manifest is closed, the older ones are deleted (a failure there is only logged:
  the next open deletes them). The next `seq` is one more than the highest name ever seen,
  valid or not, so a number is never reused.
- A store that has only `manifest.json` (written by `LocalFS`, then copied to HDFS, say)
  is read from it; the first publication writes `manifest-…1.json` and deletes it. The
  reverse is refused: `LocalFS` opening a folder with versioned manifests would read a stale
  `manifest.json` or none, so it raises `StoreLocationError` (open it as `hadoop+file://`).

The Parquet files of a part are written by Spark and durable per the file system's close
semantics (HDFS: replicated; object stores: uploaded). `HadoopFS` adds no fsync of its own:
for `hadoop+file:` that means none (the page cache survives a process crash, not a power
cut); production local stores use `LocalFS`. Renames (of the files Spark wrote, then of the
part folder) are atomic on HDFS and copies on object stores, which costs time but not
correctness: nothing is visible until the manifest lists it, and what a crash leaves behind
is unlisted and deleted at the next open.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from pomoview.server.disk.fileio import OS_FILES, FileIO

log = logging.getLogger("pomoview.store")

MANIFEST = "manifest.json"
TMP_PREFIX = ".tmp-"
HADOOP_PREFIX = "hadoop+"
_VERSIONED = re.compile(r"manifest-(\d{20})\.json")


class StoreLocationError(Exception):
    """The store's location cannot be used: the message says why."""


@dataclass(frozen=True)
class Entry:
    """A folder entry: its name (not its path) and whether it is a folder."""

    name: str
    is_dir: bool


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, indent=1).encode("utf-8")


class StoreFS(ABC):
    """A store's location and the file operations the store needs there.

    Paths are strings in the file system's own notation: a local path for `LocalFS`, a
    Hadoop path (URI) for `HadoopFS`; build them with `join` from `root`.
    """

    #: The store's root folder.
    root: str

    @abstractmethod
    def describe(self) -> str:
        """The location, for messages."""

    @abstractmethod
    def join(self, base: str, *names: str) -> str:
        """`base` with the folder or file `names` under it."""

    @abstractmethod
    def spark_path(self, path: str) -> str:
        """`path` as Spark must be given it to read or write there."""

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def list_dir(self, path: str) -> list[Entry]:
        """The entries of a folder, by name; FileNotFoundError if it does not exist. Hidden
        checksum files a file system keeps beside its files may be left out."""

    @abstractmethod
    def makedirs(self, path: str) -> None:
        """Create a folder and its parents; nothing if it exists."""

    @abstractmethod
    def delete_tree(self, path: str) -> None:
        """Delete a file or folder with everything under it; nothing if it does not exist."""

    @abstractmethod
    def delete_file(self, path: str) -> None: ...

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Move a file or folder to `dst`, which must not exist (its parent must)."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abstractmethod
    def sync_tree(self, path: str) -> None:
        """Make the files under `path` and their names durable, where the file system needs
        it after the writer closed them."""

    @abstractmethod
    def sync_dir(self, path: str) -> None:
        """Make the entries of folder `path` (new names, renames into it) durable, where the
        file system needs it."""

    @abstractmethod
    def read_manifest(self) -> dict[str, Any] | None:
        """The current manifest, or None for a new store. Called once, at open; may delete
        what an interrupted replacement left."""

    @abstractmethod
    def write_manifest(self, doc: dict[str, Any]) -> None:
        """Replace the manifest with `doc`, atomically and durably. If this raises, the
        manifest is the old one or, rarely (a failure after the new one was complete), the
        new one."""


class LocalFS(StoreFS):
    """A local folder: every operation through `files`, with fsyncs, and an atomic rename for
    the manifest."""

    def __init__(self, root: Path | str, files: FileIO = OS_FILES) -> None:
        self.root = str(Path(root).absolute())
        self._files = files

    def describe(self) -> str:
        return self.root

    def join(self, base: str, *names: str) -> str:
        return os.path.join(base, *names)

    def spark_path(self, path: str) -> str:
        # Qualified, so that a Spark whose default file system is another one (a cluster with
        # HDFS) still reads this folder, mounted at the same path on every node.
        return "file://" + path

    def exists(self, path: str) -> bool:
        return self._files.exists(path)

    def list_dir(self, path: str) -> list[Entry]:
        return [Entry(e.name, e.is_dir) for e in self._files.list_dir(path)]

    def makedirs(self, path: str) -> None:
        # Durably: the store's root may be new, and a source's folder holds published parts.
        self._files.makedirs_durably(path)

    def delete_tree(self, path: str) -> None:
        self._files.delete_tree(path)

    def delete_file(self, path: str) -> None:
        self._files.unlink(path)

    def rename(self, src: str, dst: str) -> None:
        self._files.rename(src, dst)

    def read_bytes(self, path: str) -> bytes:
        return self._files.read_bytes(path)

    def sync_tree(self, path: str) -> None:
        # Spark's local file system never fsyncs; the log is truncated behind what the
        # manifest lists, so a part must be on disk before the manifest names it. Files
        # first, each folder after what it holds.
        for entry in self._files.list_dir(path):
            child = os.path.join(path, entry.name)
            if entry.is_dir:
                self.sync_tree(child)
            else:
                self._files.fsync_path(child)
        self._files.fsync_path(path)

    def sync_dir(self, path: str) -> None:
        self._files.fsync_path(path)

    def read_manifest(self) -> dict[str, Any] | None:
        names = [e.name for e in self._files.list_dir(self.root)]
        versioned = sorted(n for n in names if _VERSIONED.fullmatch(n))
        if versioned:
            raise StoreLocationError(
                f"the store {self.root} was written through Hadoop's file system (it has "
                f"{versioned[-1]}, not only {MANIFEST}): open it as {HADOOP_PREFIX}file://{self.root}"
            )
        if MANIFEST not in names:
            return None
        doc: dict[str, Any] = json.loads(
            self._files.read_bytes(os.path.join(self.root, MANIFEST)).decode("utf-8")
        )
        return doc

    def write_manifest(self, doc: dict[str, Any]) -> None:
        tmp = os.path.join(self.root, f"{TMP_PREFIX}{uuid.uuid4().hex}-{MANIFEST}")
        f = self._files.create(tmp)
        try:
            try:
                f.write(_encode(doc))
                f.fsync()
            finally:
                f.close()
        except BaseException:
            with contextlib.suppress(OSError):
                self._files.unlink(tmp)  # on a full disk, the room a retry needs
            raise
        self._files.rename(tmp, os.path.join(self.root, MANIFEST))
        self._files.fsync_path(self.root)


def _java_exception(err: BaseException) -> str | None:
    """The class name of the Java exception a py4j call raised, if it raised one."""
    java = getattr(err, "java_exception", None)
    if java is None:
        return None
    try:
        return str(java.getClass().getName())
    except Exception:  # noqa: BLE001 (the JVM may be gone)
        return None


class HadoopFS(StoreFS):
    """A location on a file system of the Spark JVM's Hadoop client, through py4j.

    `spark` returns the current session (it may be a new one after the JVM died: the
    `FileSystem` is looked up again then). Every operation needs the JVM, opening too.
    """

    def __init__(self, uri: str, spark: Callable[[], Any]) -> None:
        stripped = uri.rstrip("/")
        self.root = uri if stripped.endswith(":") else stripped  # file:/// stays itself
        self._spark = spark
        self._lock = threading.Lock()
        self._session: Any = None
        self._fs: Any = None
        self._jvm: Any = None
        self._next_seq = 1  # the seq of the next manifest
        self._superseded: list[str] = []  # manifest files to delete after the next one

    def describe(self) -> str:
        return self.root

    # --- the JVM side ---------------------------------------------------------------------

    def _client(self) -> tuple[Any, Any]:
        """(FileSystem, jvm) of the current session."""
        session = self._spark()
        with self._lock:
            if session is not self._session:
                context = session.sparkContext
                jvm = context._jvm
                conf = context._jsc.hadoopConfiguration()
                try:
                    fs = jvm.org.apache.hadoop.fs.Path(self.root).getFileSystem(conf)
                except Exception as err:
                    from pomoview.server.spark.session import spark_error_reason

                    raise StoreLocationError(
                        f"the store {self.root} cannot be opened with Hadoop's file system: "
                        f"{spark_error_reason(err)}"
                    ) from err
                self._session, self._fs, self._jvm = session, fs, jvm
            return self._fs, self._jvm

    @staticmethod
    def _path(jvm: Any, path: str) -> Any:
        return jvm.org.apache.hadoop.fs.Path(path)

    # --- file operations ------------------------------------------------------------------

    def join(self, base: str, *names: str) -> str:
        return "/".join([base.rstrip("/"), *names]) if names else base

    def spark_path(self, path: str) -> str:
        return path

    def exists(self, path: str) -> bool:
        fs, jvm = self._client()
        return bool(fs.exists(self._path(jvm, path)))

    def list_dir(self, path: str) -> list[Entry]:
        fs, jvm = self._client()
        try:
            statuses = fs.listStatus(self._path(jvm, path))
        except Exception as err:
            if _java_exception(err) == "java.io.FileNotFoundException":
                raise FileNotFoundError(path) from err
            raise
        entries = [Entry(str(s.getPath().getName()), bool(s.isDirectory())) for s in statuses]
        return sorted(entries, key=lambda e: e.name)

    def makedirs(self, path: str) -> None:
        fs, jvm = self._client()
        if not fs.mkdirs(self._path(jvm, path)):
            raise OSError(f"cannot create the folder {path}")

    def delete_tree(self, path: str) -> None:
        fs, jvm = self._client()
        fs.delete(self._path(jvm, path), True)  # False when it did not exist: fine

    def delete_file(self, path: str) -> None:
        fs, jvm = self._client()
        if not fs.delete(self._path(jvm, path), False):
            raise FileNotFoundError(path)

    def rename(self, src: str, dst: str) -> None:
        fs, jvm = self._client()
        # Hadoop's rename returns False on many failures rather than raising.
        if not fs.rename(self._path(jvm, src), self._path(jvm, dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def sync_tree(self, path: str) -> None:
        pass  # a closed file is durable per the file system's own semantics (module docstring)

    def sync_dir(self, path: str) -> None:
        pass  # a completed create or rename is durable on HDFS and object stores

    def read_bytes(self, path: str) -> bytes:
        fs, jvm = self._client()
        stream = fs.open(self._path(jvm, path))
        try:
            return bytes(jvm.org.apache.hadoop.io.IOUtils.readFullyToByteArray(stream))
        finally:
            stream.close()

    def _create(self, path: str, data: bytes) -> None:
        """Write a new file (refused if it exists), hsynced where the stream can."""
        fs, jvm = self._client()
        target = self._path(jvm, path)
        stream = fs.create(target, False)
        try:
            try:
                stream.write(data)
                if stream.hasCapability("hsync"):
                    stream.hsync()
            finally:
                stream.close()
        except BaseException:
            # Disk and memory should agree: a manifest whose publication raised is removed
            # if it can be (best effort; discovery skips it if it is incomplete).
            try:
                fs.delete(target, False)
            except Exception:  # noqa: BLE001
                log.warning("could not delete the failed manifest %s", path, exc_info=True)
            raise

    # --- the manifest ----------------------------------------------------------------------

    def read_manifest(self) -> dict[str, Any] | None:
        names = [e.name for e in self.list_dir(self.root) if not e.is_dir]
        versions = sorted(
            (int(m.group(1)) for n in names if (m := _VERSIONED.fullmatch(n)) is not None), reverse=True
        )
        self._next_seq = versions[0] + 1 if versions else 1
        doc: dict[str, Any] | None = None
        chosen: int | None = None
        for seq in versions:
            data = self.read_bytes(self._manifest_path(seq))
            try:
                parsed = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                log.warning(
                    "the manifest %s is incomplete (a publication that did not finish); "
                    "the previous one is used",
                    self._manifest_path(seq),
                )
                continue
            if isinstance(parsed, dict):
                doc, chosen = parsed, seq
                break
        legacy = MANIFEST in names
        if doc is None and legacy:
            doc = json.loads(self.read_bytes(self.join(self.root, MANIFEST)).decode("utf-8"))
        # Everything else is superseded or incomplete: deleted now, or (the legacy manifest
        # still being the current one) once the next manifest is written.
        stale = [self._manifest_path(v) for v in versions if v != chosen]
        if legacy:
            if chosen is None:
                self._superseded.append(self.join(self.root, MANIFEST))
            else:
                stale.append(self.join(self.root, MANIFEST))
        for path in stale:
            self.delete_tree(path)
        if chosen is not None:
            self._superseded.append(self._manifest_path(chosen))
        return doc

    def write_manifest(self, doc: dict[str, Any]) -> None:
        seq = self._next_seq
        self._next_seq += 1  # never reused, whatever happens below
        path = self._manifest_path(seq)
        self._create(path, _encode(doc))
        superseded, self._superseded = self._superseded, [path]
        for old in superseded:
            try:
                self.delete_tree(old)
            except Exception:  # noqa: BLE001 (the next open deletes it)
                log.warning("could not delete the superseded manifest %s", old, exc_info=True)

    def _manifest_path(self, seq: int) -> str:
        return self.join(self.root, f"manifest-{seq:020d}.json")


def split_location(location: str) -> tuple[str, str]:
    """("local", absolute path) or ("hadoop", URI) for a store location: a plain path or a
    file:// URI is local; `hadoop+URI` or any other URI goes through Hadoop. ValueError for
    a location that is neither."""
    forced = location.startswith(HADOOP_PREFIX)
    text = location[len(HADOOP_PREFIX) :] if forced else location
    try:
        parts = urlsplit(text)
    except ValueError as err:
        raise ValueError(f"store {location!r}: not a path or a URI ({err})") from None
    if parts.scheme == "" and not forced:
        return "local", str(Path(text).expanduser().absolute())
    if parts.scheme == "":
        raise ValueError(f"store {location!r}: {HADOOP_PREFIX} must be followed by a URI")
    if parts.query or parts.fragment:
        raise ValueError(f"store {location!r}: a store URI takes no query or fragment")
    if not parts.netloc and not parts.path.startswith("/"):
        raise ValueError(
            f"store {location!r}: a URI must be absolute, {parts.scheme}://authority/path or "
            f"{parts.scheme}:/path (for a local folder with a colon in its name, write ./{text})"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"store {location!r}: a file:// URI must name a local path (file:///path), "
                f"not the host {parts.netloc!r}"
            )
        if not forced:
            return "local", str(Path(url2pathname(unquote(parts.path))).absolute())
    return "hadoop", text


def open_store_fs(location: str, spark: Callable[[], Any]) -> StoreFS:
    """The `StoreFS` of a store location (see `split_location`); `spark` returns the session
    whose Hadoop client a `HadoopFS` uses."""
    kind, where = split_location(location)
    return LocalFS(where) if kind == "local" else HadoopFS(where, spark)
