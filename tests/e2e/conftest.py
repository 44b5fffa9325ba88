from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_process import VOTES, ServerProcess


@pytest.fixture(scope="module")
def votes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real server with examples/votes.pomo installed, shared by a module's tests."""
    data = Path(tmp_path_factory.mktemp("votes")) / "data"
    server = ServerProcess(data, program=VOTES).start()
    yield server
    server.stop()
