"""TensorFlow Serving's protobuf messages, without TensorFlow.

The messages are built from descriptors this package ships, ``_tfs_descriptors.binpb``: a
FileDescriptorSet of every ``.proto`` file TF Serving's API, config and SavedModel messages
need (55 files, dependencies first), each file's serialized FileDescriptorProto exactly as the
pinned ``tensorflow`` and ``tensorflow-serving-api`` 2.21.0 wheels hold it. So the client, the
load generators and Locust need neither wheel (the plain ``pip install serve-bench`` has none):
importing anything under ``tensorflow`` runs ``tensorflow/__init__.py`` (seconds, hundreds of
MB), and TF Serving's generated modules import ``tensorflow.core.framework.tensor_pb2``. The
descriptors go into a private pool, which never clashes with TensorFlow's own classes when both
live in one process (the local server). The two well-known files they use (any.proto,
wrappers.proto) come from the protobuf runtime, as they would for the generated modules.

The shipped file is generated once from the installed wheels (``make descriptors``, i.e.
``python -m serve_bench._protos --write``), which reads the serialized descriptors out of their
``*_pb2.py`` sources without executing them; ``tests/test_descriptors.py`` holds the shipped
file to the installed wheels byte for byte, so a new pin without a new file fails there.

Two TF Serving config files are not in the ``tensorflow-serving-api`` wheel:
``BatchingParameters`` (session_bundle_config.proto) and ``MonitoringConfig``
(monitoring_config.proto). They are declared here with TF Serving's field
names and numbers, so batching and monitoring files written for
``tensorflow_model_server`` parse unchanged.
"""

from __future__ import annotations

import ast
import functools
import importlib.resources
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

__all__ = ["message", "pool", "varint"]

SHIPPED = "_tfs_descriptors.binpb"  # package data of serve_bench (pyproject.toml)
_ROOT_FILES = (
    "tensorflow_serving/apis/prediction_service.proto",
    "tensorflow_serving/apis/model_service.proto",
    "tensorflow_serving/apis/prediction_log.proto",
    "tensorflow_serving/config/model_server_config.proto",
    "tensorflow/core/protobuf/saved_model.proto",
)
_WELL_KNOWN = {
    "google/protobuf/any.proto": any_pb2,
    "google/protobuf/wrappers.proto": wrappers_pb2,
}
_FILE_TAG = 0x0A  # FileDescriptorSet.file: field 1, length-delimited


class ProtoSourceError(RuntimeError):
    """The shipped descriptors, or the wheels they are generated from, are missing or unreadable."""


# --- the generator: read the descriptors out of the installed wheels --------------------------------


def _site_roots() -> list[str]:
    roots: list[str] = []
    for package in ("tensorflow_serving", "tensorflow"):
        spec = importlib.util.find_spec(package)  # finds, does not import
        if spec is None or not spec.submodule_search_locations:
            raise ProtoSourceError(
                f"package {package!r} is not installed; the descriptors are generated from the pinned wheels: "
                "pip install -c constraints.txt 'serve-bench[tensorflow]'"
            )
        package_dir = next(iter(spec.submodule_search_locations))
        roots.append(os.path.dirname(package_dir))
        if package == "tensorflow":
            # xla/tsl protos ship under tensorflow/compiler/ in the wheel.
            roots.append(os.path.join(package_dir, "compiler"))
            roots.append(package_dir)
    return list(dict.fromkeys(roots))


def _serialized_descriptor(pb2_path: str) -> bytes:
    with open(pb2_path, "rb") as f:
        tree = ast.parse(f.read(), filename=pb2_path)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", "") == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            value = node.args[0].value
            if isinstance(value, bytes):
                return value
    raise ProtoSourceError(f"no serialized descriptor found in {pb2_path}")


def _find_pb2(proto_name: str, roots: list[str]) -> str:
    relative = proto_name[: -len(".proto")] + "_pb2.py"
    for root in roots:
        candidate = os.path.join(root, relative)
        if os.path.exists(candidate):
            return candidate
    raise ProtoSourceError(f"cannot find the generated module for {proto_name} under {roots}")


def wheel_files() -> list[tuple[str, bytes]]:
    """(proto name, serialized FileDescriptorProto) of every file the root files need, as the installed
    wheels hold them, dependencies first; the well-known files are left to the protobuf runtime."""
    roots = _site_roots()
    files: list[tuple[str, bytes]] = []
    seen: set[str] = set()

    def add(proto_name: str) -> None:
        if proto_name in seen:
            return
        seen.add(proto_name)
        if proto_name in _WELL_KNOWN:
            return
        serialized = _serialized_descriptor(_find_pb2(proto_name, roots))
        for dependency in descriptor_pb2.FileDescriptorProto.FromString(serialized).dependency:
            add(dependency)
        files.append((proto_name, serialized))

    for name in _ROOT_FILES:
        add(name)
    return files


def encode_set(files: Sequence[tuple[str, bytes]]) -> bytes:
    """A FileDescriptorSet holding each file's bytes unchanged (a set is its files, one field after another)."""
    return b"".join(bytes([_FILE_TAG]) + varint(len(data)) + data for _, data in files)


def varint(n: int) -> bytes:
    """``n`` as a protobuf base-128 varint, shortest form (a tag, a length): the one encoder serve-bench has."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_set(data: bytes) -> list[tuple[str, bytes]]:
    """(proto name, the file's bytes as stored) of each file in a FileDescriptorSet, in order."""
    return [(descriptor_pb2.FileDescriptorProto.FromString(raw).name, raw) for raw in _records(data)]


def _records(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        if data[pos] != _FILE_TAG:
            raise ProtoSourceError(f"not a FileDescriptorSet: byte {pos} is {data[pos]:#04x}, not a file's tag")
        pos += 1
        length = shift = 0
        while True:
            if pos >= len(data):
                raise ProtoSourceError("not a FileDescriptorSet: it ends inside a length")
            byte = data[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if pos + length > len(data):
            raise ProtoSourceError(f"not a FileDescriptorSet: a file of {length} bytes runs past its end")
        yield data[pos : pos + length]
        pos += length


def stale_files(shipped: bytes, wheels: Sequence[tuple[str, bytes]]) -> list[str]:
    """How the shipped set differs from the wheels' files, one line per difference; [] when it is current."""
    ours = decode_set(shipped)
    mine, theirs = dict(ours), dict(wheels)
    problems = [f"{name}: in the wheels, not shipped" for name in theirs if name not in mine]
    problems += [f"{name}: shipped, not in the wheels" for name in mine if name not in theirs]
    problems += [
        f"{name}: differs from the wheels' ({len(mine[name])} bytes shipped, {len(data)} in the wheels)"
        for name, data in theirs.items()
        if name in mine and mine[name] != data
    ]
    if not problems and [name for name, _ in ours] != [name for name, _ in wheels]:
        problems.append("the files are shipped in another order than the wheels' dependencies give")
    return problems


def shipped_path() -> Path:
    """Where the shipped descriptors are in this source tree (the generator writes there)."""
    return Path(__file__).with_name(SHIPPED)


def write_descriptors(path: Path | None = None) -> Path:
    """Generate the shipped FileDescriptorSet from the installed wheels."""
    target = path or shipped_path()
    target.write_bytes(encode_set(wheel_files()))
    return target


# --- the runtime: the shipped descriptors, no wheel needed ------------------------------------------


def shipped_bytes() -> bytes:
    try:
        return importlib.resources.files("serve_bench").joinpath(SHIPPED).read_bytes()
    except OSError as exc:
        raise ProtoSourceError(
            f"serve_bench/{SHIPPED} is missing from this installation ({exc}); reinstall serve-bench, "
            "or in a checkout run: make descriptors"
        ) from exc


def _extra_files() -> list[descriptor_pb2.FileDescriptorProto]:
    """session_bundle_config.proto's BatchingParameters and monitoring_config.proto."""
    f = descriptor_pb2.FieldDescriptorProto
    batching = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    params = batching.message_type.add(name="BatchingParameters")
    for number, name, type_name in (
        (1, "max_batch_size", ".google.protobuf.Int64Value"),
        (2, "batch_timeout_micros", ".google.protobuf.Int64Value"),
        (3, "max_enqueued_batches", ".google.protobuf.Int64Value"),
        (4, "num_batch_threads", ".google.protobuf.Int64Value"),
        (5, "thread_pool_name", ".google.protobuf.StringValue"),
        (8, "enable_large_batch_splitting", ".google.protobuf.BoolValue"),
        (9, "max_execution_batch_size", ".google.protobuf.Int64Value"),
    ):
        params.field.add(name=name, number=number, label=f.LABEL_OPTIONAL, type=f.TYPE_MESSAGE, type_name=type_name)
    params.field.add(name="allowed_batch_sizes", number=6, label=f.LABEL_REPEATED, type=f.TYPE_INT64)
    params.field.add(name="pad_variable_length_inputs", number=7, label=f.LABEL_OPTIONAL, type=f.TYPE_BOOL)

    monitoring = descriptor_pb2.FileDescriptorProto(
        name="tensorflow_serving/config/monitoring_config.proto",
        package="tensorflow.serving",
        syntax="proto3",
    )
    prom = monitoring.message_type.add(name="PrometheusConfig")
    prom.field.add(name="enable", number=1, label=f.LABEL_OPTIONAL, type=f.TYPE_BOOL)
    prom.field.add(name="path", number=2, label=f.LABEL_OPTIONAL, type=f.TYPE_STRING)
    config = monitoring.message_type.add(name="MonitoringConfig")
    config.field.add(
        name="prometheus_config",
        number=1,
        label=f.LABEL_OPTIONAL,
        type=f.TYPE_MESSAGE,
        type_name=".tensorflow.serving.PrometheusConfig",
    )
    return [batching, monitoring]


@functools.cache
def pool() -> descriptor_pool.DescriptorPool:
    """The private pool holding TF Serving's API, config and SavedModel descriptors."""
    result = descriptor_pool.DescriptorPool()
    for module in _WELL_KNOWN.values():
        result.Add(descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))
    for _, data in decode_set(shipped_bytes()):  # dependencies first, as written
        result.Add(descriptor_pb2.FileDescriptorProto.FromString(data))
    for extra in _extra_files():
        result.Add(extra)
    return result


@functools.cache
def message(full_name: str) -> Any:
    """The message class for a full proto name, e.g. ``tensorflow.serving.PredictRequest``."""
    return message_factory.GetMessageClass(pool().FindMessageTypeByName(full_name))


def enum_value(enum_full_name: str, value_name: str) -> int:
    return pool().FindEnumTypeByName(enum_full_name).values_by_name[value_name].number


def enum_name(enum_full_name: str, number: int) -> str:
    return pool().FindEnumTypeByName(enum_full_name).values_by_number[number].name


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m serve_bench._protos",
        description="Generate or check the shipped TF Serving descriptors against the installed wheels.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help=f"(re)write serve_bench/{SHIPPED} from the wheels")
    action.add_argument("--check", action="store_true", help="exit 1 when the shipped file differs from the wheels")
    args = parser.parse_args(argv)
    if args.write:
        path = write_descriptors()
        print(f"{path}: {len(decode_set(path.read_bytes()))} files, {path.stat().st_size} bytes")
        return 0
    problems = stale_files(shipped_bytes(), wheel_files())
    for problem in problems:
        print(f"stale: {problem}", file=sys.stderr)
    if problems:
        print("regenerate with: make descriptors", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
