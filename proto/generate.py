"""Regenerates the committed gRPC stubs from `proto/pomoview/v1/*.proto`.

Run `python -m pomoview.proto.generate` after editing a .proto file. The test
`tests/proto/test_stubs_fresh.py` calls `generate()` into a temporary folder and
fails when the committed stubs differ from what this produces.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
PACKAGE_DIR = PROTO_ROOT / "pomoview" / "v1"


def generate(out_root: Path = PROTO_ROOT) -> list[Path]:
    """Writes `*_pb2.py`, `*_pb2.pyi` and `*_pb2_grpc.py` under `out_root/pomoview/v1`."""
    from grpc_tools import protoc  # dev-only dependency

    protos = sorted(PACKAGE_DIR.glob("*.proto"))
    rel = [str(p.relative_to(PROTO_ROOT)) for p in protos]
    include = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *rel,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    out_dir = out_root / "pomoview" / "v1"
    # protoc writes absolute imports (`from pomoview.v1 import x_pb2`); the stubs live
    # under pomoview.proto, so make them relative to stay importable wherever installed.
    for grpc_file in out_dir.glob("*_pb2_grpc.py"):
        text = grpc_file.read_text()
        text = re.sub(r"^from pomoview\.v1 import", "from . import", text, flags=re.M)
        grpc_file.write_text(text)
    return sorted(out_dir.glob("*_pb2*"))


if __name__ == "__main__":
    for path in generate():
        print(path, file=sys.stderr)
