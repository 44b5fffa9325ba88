"""The committed gRPC stubs must be exactly what `pomoview.proto.generate` produces."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("grpc_tools")

from pomoview.proto import generate as gen  # noqa: E402

COMMITTED_DIR = gen.PACKAGE_DIR
HINT = "committed stubs are stale; run `python -m pomoview.proto.generate`"


def stub_differences(generated_dir: Path, committed_dir: Path) -> list[str]:
    """Names each generated `*_pb2*` file that is missing or differs in `committed_dir`,
    and each committed stub that the generator no longer produces."""
    generated = {p.name for p in generated_dir.glob("*_pb2*")}
    committed = {p.name for p in committed_dir.glob("*_pb2*")}
    problems = [f"{n}: not committed" for n in sorted(generated - committed)]
    problems += [f"{n}: committed but no longer generated" for n in sorted(committed - generated)]
    for name in sorted(generated & committed):
        if (generated_dir / name).read_bytes() != (committed_dir / name).read_bytes():
            problems.append(f"{name}: differs")
    return problems


@pytest.fixture(scope="module")
def generated_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stubs")
    files = gen.generate(root)
    assert files, "generate() produced no files"
    return root / "pomoview" / "v1"


def test_committed_stubs_match_generator(generated_dir: Path) -> None:
    problems = stub_differences(generated_dir, COMMITTED_DIR)
    assert not problems, f"{HINT}: {problems}"


def test_check_detects_an_altered_stub(generated_dir: Path, tmp_path: Path) -> None:
    # Proves the comparison can fail: alter one committed stub in a copy.
    copy = tmp_path / "v1"
    shutil.copytree(COMMITTED_DIR, copy)
    assert stub_differences(generated_dir, copy) == []
    target = copy / "view_service_pb2_grpc.py"
    target.write_bytes(target.read_bytes() + b"\n# hand edit\n")
    assert stub_differences(generated_dir, copy) == ["view_service_pb2_grpc.py: differs"]
    (copy / "view_service_pb2.pyi").unlink()
    assert "view_service_pb2.pyi: not committed" in stub_differences(generated_dir, copy)
