"""TF Serving's BatchingParameters: the one model of ``batching_parameters.txt``.

The local server reads it (``--batching_parameters_file``) and ``tune`` writes it, so both
hold the same type and refuse the same values with the same words. The rules are
tensorflow_model_server's: shared_batch_scheduler.h (Create, AddQueueAfterRewritingOptions),
bundle_factory_util.cc WrapSessionForBatching (the last allowed batch size must equal
max_batch_size) and session_bundle_config.proto's comments.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.errors import UserError

__all__ = ["BATCHING_FIELDS", "BatchingParametersError", "BatchingParams", "batching_parameters_text"]

# BatchingParameters' fields in the order the proto declares them (what a written file lists)
BATCHING_FIELDS = (
    "max_batch_size",
    "batch_timeout_micros",
    "max_enqueued_batches",
    "num_batch_threads",
    "thread_pool_name",
    "allowed_batch_sizes",
    "pad_variable_length_inputs",
    "enable_large_batch_splitting",
    "max_execution_batch_size",
)
# fields that are plain (repeated or bool) values rather than google.protobuf wrappers
_PLAIN = ("allowed_batch_sizes", "pad_variable_length_inputs")


class BatchingParametersError(UserError):
    """A BatchingParameters value TF Serving refuses (the message uses TF Serving's wording)."""


def batching_parameters_text(values: Mapping[str, object], header: str = "") -> str:
    """Text-format BatchingParameters holding ``values`` (field name -> value; fields left out stay unset).

    Written by hand so that a value of 0 (a timeout of 0) is spelt out: the protobuf printer would
    write ``batch_timeout_micros {}``, which means the same to TF Serving but not to a reader.
    """
    lines = [f"# {header}"] if header else []
    for name in BATCHING_FIELDS:
        if name not in values:
            continue
        value = values[name]
        if isinstance(value, tuple):  # allowed_batch_sizes, a repeated field
            lines += [f"{name}: {size}" for size in value]
        elif name in _PLAIN:
            lines.append(f"{name}: {'true' if value else 'false'}")
        elif isinstance(value, bool):
            lines.append(f"{name} {{ value: {'true' if value else 'false'} }}")
        elif isinstance(value, str):
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            lines.append(f'{name} {{ value: "{escaped}" }}')
        else:
            lines.append(f"{name} {{ value: {value} }}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class BatchingParams:
    """TF Serving's BatchingParameters (session_bundle_config.proto) with the defaults it applies.

    Defaults are SharedBatchScheduler's QueueOptions/Options (max_batch_size 1000,
    timeout 0, 10 enqueued batches, one batch thread per CPU, pool "batch_threads").
    ``max_execution_batch_size`` None means "not set": with splitting on, TF Serving
    then executes batches of up to max_batch_size (bundle_factory_util.h GetQueueOptions).
    Build one from text with :meth:`from_text`, check it with :meth:`validate` and
    write it for ``--batching_parameters_file`` with :meth:`to_text`.
    """

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = os.cpu_count() or 1
    thread_pool_name: str = "batch_threads"
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int | None = None

    @property
    def execution_batch_size(self) -> int:
        """The largest batch the scheduler forms (shared_batch_scheduler.h GetMaxExecutionBatchSize)."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size is not None:
            return self.max_execution_batch_size
        return self.max_batch_size

    @property
    def queue_capacity_batches(self) -> int:
        """max_enqueued_batches as the scheduler uses it: SharedBatchScheduler::AddQueue turns 0
        into 1 when splitting is off, for old configurations that relied on it."""
        if not self.enable_large_batch_splitting and self.max_enqueued_batches == 0:
            return 1
        return self.max_enqueued_batches

    def validate(self) -> BatchingParams:
        """Refuse what tensorflow_model_server refuses, with its wording; return self when valid.

        Checks follow shared_batch_scheduler.h (Create, AddQueueAfterRewritingOptions) and
        bundle_factory_util.cc WrapSessionForBatching. Raises BatchingParametersError.
        """

        def fail(message: str) -> None:
            raise BatchingParametersError(message)

        if self.num_batch_threads < 1:
            fail(f"num_batch_threads must be positive; was {self.num_batch_threads}")
        if self.max_batch_size < 1:
            # TF Serving maps max_batch_size onto the queue's input_batch_size_limit
            fail(f"input_batch_size_limit (max_batch_size) must be positive; was {self.max_batch_size}")
        if self.batch_timeout_micros < 0:
            fail(f"batch_timeout_micros must be non-negative; was {self.batch_timeout_micros}")
        if self.queue_capacity_batches < 1:
            fail(f"max_enqueued_batches must be positive; was {self.max_enqueued_batches}")
        if self.enable_large_batch_splitting:
            if self.execution_batch_size < 1:
                fail(f"max_execution_batch_size must be positive; was {self.execution_batch_size}")
            if self.max_batch_size < self.execution_batch_size:
                fail(
                    "When enable_large_batch_splitting is true, input_batch_size_limit must be greater than or "
                    f"equal to max_execution_batch_size. (max_batch_size {self.max_batch_size}, "
                    f"max_execution_batch_size {self.execution_batch_size})"
                )
        allowed = self.allowed_batch_sizes
        if allowed:
            if any(size < 1 for size in allowed):
                fail(f"allowed_batch_sizes entries must be positive; got {list(allowed)}")
            if any(b <= a for a, b in itertools.pairwise(allowed)):
                fail("allowed_batch_sizes entries must be monotonically increasing")
            if allowed[-1] != self.max_batch_size:
                fail(
                    "Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                    f"{allowed[-1]}; expected {self.max_batch_size}"
                )
        return self

    def warnings(self) -> tuple[str, ...]:
        """Valid settings that probably do not do what the user meant (TF Serving accepts them silently)."""
        notes: list[str] = []
        if self.max_execution_batch_size is not None and not self.enable_large_batch_splitting:
            notes.append("max_execution_batch_size is ignored unless enable_large_batch_splitting is true")
        if self.enable_large_batch_splitting and self.allowed_batch_sizes:
            limit = self.execution_batch_size
            fitting = [s for s in self.allowed_batch_sizes if s >= limit]
            if fitting and fitting[0] != limit:
                notes.append(
                    f"batches of up to {limit} (max_execution_batch_size) are padded to the next allowed "
                    f"size; a batch of {limit} becomes {fitting[0]}: add {limit} to allowed_batch_sizes"
                )
        return tuple(notes)

    @classmethod
    def from_text(cls, text: str, source: str = "batching parameters") -> BatchingParams:
        """Parse a text-format BatchingParameters (what TF Serving reads) and validate it.

        Unset fields keep TF Serving's defaults. Raises BatchingParametersError naming ``source``.
        """
        try:
            proto = text_format.Parse(text, _protos.message("tensorflow.serving.BatchingParameters")())
        except text_format.ParseError as exc:
            # ParseError's text starts with "line:column : problem"
            raise BatchingParametersError(
                f"{source} does not parse at line {exc.GetLine()}: {str(exc).split(' : ', 1)[-1]}"
            ) from exc
        values: dict[str, Any] = {
            name: getattr(proto, name).value for name in BATCHING_FIELDS if name not in _PLAIN and proto.HasField(name)
        }
        values["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
        values["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
        return replace(cls(), **values).checked(source)

    def checked(self, where: str) -> BatchingParams:
        """:meth:`validate`, with ``where`` (a file, a spec entry) leading the message."""
        try:
            return self.validate()
        except BatchingParametersError as exc:
            raise BatchingParametersError(f"{where}: {exc}") from None

    def to_text(self) -> str:
        """Text-format BatchingParameters for ``--batching_parameters_file`` (TF Serving parses it as is)."""
        values: dict[str, object] = {
            name: getattr(self, name)
            for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads")
        }
        if self.thread_pool_name != BatchingParams.thread_pool_name:
            values["thread_pool_name"] = self.thread_pool_name
        values["allowed_batch_sizes"] = self.allowed_batch_sizes
        if self.pad_variable_length_inputs:
            values["pad_variable_length_inputs"] = True
        if self.enable_large_batch_splitting:
            values["enable_large_batch_splitting"] = True
        if self.max_execution_batch_size is not None:
            values["max_execution_batch_size"] = self.max_execution_batch_size
        return batching_parameters_text(values)
