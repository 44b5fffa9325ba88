"""fsync of a file or folder by path: a rename or a new file is durable only once its folder is synced."""

from __future__ import annotations

import os


def fsync_path(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
