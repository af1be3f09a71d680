"""TensorFlow Serving's protobuf messages, without importing TensorFlow.

The generated modules of ``tensorflow-serving-api`` import
``tensorflow.core.framework.tensor_pb2``, and importing anything under the
``tensorflow`` package runs ``tensorflow/__init__.py`` (seconds, hundreds of
MB). The client must not pay that, so this module reads the serialized file
descriptors out of the installed ``*_pb2.py`` sources (without executing them)
into a private descriptor pool and builds message classes from it. The wire
format is the same; a private pool also never clashes with TensorFlow's own
classes when both live in one process (the local server).

Two TF Serving config files are not in the ``tensorflow-serving-api`` wheel:
``BatchingParameters`` (session_bundle_config.proto) and ``MonitoringConfig``
(monitoring_config.proto). They are declared here with TF Serving's field
names and numbers, so batching and monitoring files written for
``tensorflow_model_server`` parse unchanged.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
from typing import Any

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

__all__ = ["message", "pool"]

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


class ProtoSourceError(RuntimeError):
    """The installed tensorflow / tensorflow-serving-api packages are missing or unreadable."""


def _site_roots() -> list[str]:
    roots: list[str] = []
    for package in ("tensorflow_serving", "tensorflow"):
        spec = importlib.util.find_spec(package)  # finds, does not import
        if spec is None or not spec.submodule_search_locations:
            raise ProtoSourceError(
                f"package {package!r} is not installed; run: pip install 'serve-bench' "
                "(it brings tensorflow-serving-api)"
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
    roots = _site_roots()
    result = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto_name: str) -> None:
        if proto_name in added:
            return
        if proto_name in _WELL_KNOWN:
            serialized = _WELL_KNOWN[proto_name].DESCRIPTOR.serialized_pb
        else:
            serialized = _serialized_descriptor(_find_pb2(proto_name, roots))
        file_proto = descriptor_pb2.FileDescriptorProto.FromString(serialized)
        for dependency in file_proto.dependency:
            add(dependency)
        result.Add(file_proto)
        added.add(proto_name)

    for name in _ROOT_FILES:
        add(name)
    for extra in _extra_files():
        for dependency in extra.dependency:
            add(dependency)
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
