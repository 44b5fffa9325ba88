"""A bulk load's input files as the Spark JVM's Hadoop client sees them (any URI Spark reads,
local files too): their stamps (size, modification time) before and after the load's pass, so
that a file changed during the load is refused, and the first line of each, a CSV header,
read without a Spark job.

The stamps are taken before Spark lists the files and again after the pass: equal stamps mean
the file did not change from before Spark planned the pass to after it read the last row (a
change that keeps both the size and the modification time, within the clock's granularity, is
not seen: the same limit as any check by listing).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.sql import SparkSession

# A file's name whatever the spelling of its URI: Spark writes `file:/x` in `_metadata` and
# `file:///x` in `inputFiles()`, both with the path percent-encoded.
FileKey = tuple[str, str, str]
Stamp = tuple[int, int]  # (size in bytes, modification time in ms)


def file_key(uri: str) -> FileKey:
    parts = urlsplit(uri)
    return parts.scheme.lower() or "file", parts.netloc, unquote(parts.path)


class InputFiles:
    """The files under the path a load names (a file, a folder, or a glob, as Spark reads it),
    through the session's Hadoop configuration."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        context = spark.sparkContext
        self._jvm: Any = context._jvm
        self._conf: Any = context._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        self.path = path

    def _hadoop_path(self, uri: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._jvm.java.net.URI(uri))

    def stamps(self) -> dict[FileKey, Stamp]:
        """Every file under the path now (hidden ones too: the caller picks those Spark read)."""
        root = self._jvm.org.apache.hadoop.fs.Path(self.path)  # as Spark parses the load's path
        fs = root.getFileSystem(self._conf)
        out: dict[FileKey, Stamp] = {}
        for status in fs.globStatus(root) or []:
            if status.isDirectory():
                found = fs.listFiles(status.getPath(), True)
                while found.hasNext():
                    self._add(out, found.next())
            else:
                self._add(out, status)
        return out

    @staticmethod
    def _add(out: dict[FileKey, Stamp], status: Any) -> None:
        uri = str(status.getPath().toUri().toString())
        out[file_key(uri)] = (int(status.getLen()), int(status.getModificationTime()))

    def first_line(self, uri: str) -> str | None:
        """The first line of the file at `uri` (a URI from `DataFrame.inputFiles`), decompressed
        as Spark's text reader does, without its end; None for an empty file."""
        jvm = self._jvm
        path = self._hadoop_path(uri)
        stream = path.getFileSystem(self._conf).open(path)
        try:
            codec = jvm.org.apache.hadoop.io.compress.CompressionCodecFactory(self._conf).getCodec(path)
            if codec is not None:
                stream = codec.createInputStream(stream)
            # Java's readLine ends a line at \n, \r or \r\n, as Hadoop's line reader does.
            reader = jvm.java.io.BufferedReader(jvm.java.io.InputStreamReader(stream, "UTF-8"))
            line = reader.readLine()
        finally:
            stream.close()
        return None if line is None else str(line)
