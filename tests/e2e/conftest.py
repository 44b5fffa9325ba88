from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .server_process import VOTES, ServerProcess


@pytest.fixture(scope="session")
def votes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One real server with examples/votes.pomo installed and default flags, shared by the
    modules that only read it or write keys of their own (each start and Spark boot costs
    seconds to tens of seconds). A module that breaks its server defines its own fixture."""
    data = Path(tmp_path_factory.mktemp("votes")) / "data"
    server = ServerProcess(data, program=VOTES).start()
    yield server
    server.stop()
