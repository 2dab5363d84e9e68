"""Regenerate the *_pb2.py / *_pb2.pyi modules from proto/ (run after editing a .proto file).

    python tools/gen_proto.py            # write beside their owners
    python tools/gen_proto.py --out DIR  # write under DIR instead (the drift test uses this)

Generated modules are committed so that installing graphrt needs no protoc; a test regenerates
them and fails if the committed files differ. Pinned grpcio-tools (see pyproject) keeps the output
byte-stable.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
# Triton's and KServe's Python clients register the same `inference.*` messages in protobuf's
# default descriptor pool; a process that imports one of them and graphrt's KServe module would
# fail with "duplicate symbol". So KServe's messages are built in a pool of their own (the wire
# format, and so compatibility, is unchanged).
PRIVATE_POOL = {"graphrt/kserve/grpc_predict_v2.proto"}
DEFAULT_POOL = "_descriptor_pool.Default().AddSerializedFile("


def proto_files() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out: Path) -> None:
    include = Path(protoc.__file__).parent / "_proto"
    for proto in proto_files():
        args = [
            "protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            str(proto.relative_to(PROTO_ROOT)),
        ]
        if "\nservice " in proto.read_text():
            args.insert(-1, f"--grpc_python_out={out}")
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto}")
        relative = proto.relative_to(PROTO_ROOT).as_posix()
        if relative in PRIVATE_POOL:
            module = out / relative.replace(".proto", "_pb2.py")
            text = module.read_text()
            assert DEFAULT_POOL in text, f"unexpected protoc output for {relative}"
            private = "_descriptor_pool.DescriptorPool().AddSerializedFile("
            module.write_text(text.replace(DEFAULT_POOL, private))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    generate(args.out)


if __name__ == "__main__":
    main()
