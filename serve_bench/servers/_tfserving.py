"""TF Serving itself (``tensorflow_model_server``), which serve-bench measures but does not start: tune restarts it
through docker compose or a command of the user's (``[server] kind = "compose" | "command"``), a sweep reaches
it by URL. Its knobs are BatchingParameters' fields (``export.BatchingParams``, the one model of the file, which
the local server reads too) at TF Serving's own defaults.
"""

from __future__ import annotations

from serve_bench import _server_facts
from serve_bench.export import BATCHING_FIELDS, BatchingParams
from serve_bench.servers._kind import SIZES, Knob, ServerKind

__all__ = ["TFSERVING"]

_OWN = BatchingParams()
_CITED = {
    "max_batch_size": "SharedBatchScheduler QueueOptions (shared_batch_scheduler.h)",
    "batch_timeout_micros": "QueueOptions (shared_batch_scheduler.h)",
    "max_enqueued_batches": "QueueOptions (shared_batch_scheduler.h)",
    "num_batch_threads": "Options, one per CPU (shared_batch_scheduler.h)",
    "thread_pool_name": "Options (shared_batch_scheduler.h)",
    "allowed_batch_sizes": "none: any size up to max_batch_size (session_bundle_config.proto)",
    "pad_variable_length_inputs": "session_bundle_config.proto",
    "enable_large_batch_splitting": "QueueOptions (shared_batch_scheduler.h)",
    "max_execution_batch_size": "unset: max_batch_size (bundle_factory_util.h GetQueueOptions)",
}
_TYPES = {"allowed_batch_sizes": SIZES, "thread_pool_name": str}
_TYPES.update(pad_variable_length_inputs=bool, enable_large_batch_splitting=bool)

TFSERVING = ServerKind(
    _server_facts.TFSERVING,
    "TF Serving",
    tuple(Knob(name, _TYPES.get(name, int), getattr(_OWN, name), _CITED[name]) for name in BATCHING_FIELDS),
)
