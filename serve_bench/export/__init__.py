"""Model export: the catalogue, SavedModels in TF Serving's layout, warm-up records, models.config.

Importing this package is cheap; TensorFlow is imported when a model is built.
"""

from serve_bench.export._batching import (
    BATCHING_FIELDS,
    BatchingParametersError,
    BatchingParams,
    batching_parameters_text,
)
from serve_bench.export._config import models_config_text, write_models_config
from serve_bench.export._convert import (
    Conversion,
    converted_files,
    converted_model_path,
    feature_tolerance,
    parse_runtimes,
    relative_difference,
)
from serve_bench.export._export import (
    DEFAULT_WARMUP_BATCH_SIZES,
    ExportResult,
    ModelFacts,
    check_version,
    check_warmup_batch_sizes,
    export_model,
    export_without_tensorflow,
    model_facts,
    parse_batch_sizes,
)
from serve_bench.export._layout import (
    METADATA_FILE,
    WARMUP_FILE,
    latest_metadata,
    list_models,
    list_versions,
    read_metadata,
)
from serve_bench.export._listing import catalogue_table, describe_export
from serve_bench.export._repos import (
    MLSERVER_RUNTIME,
    MLServerBatching,
    TritonBatching,
    mlserver_settings,
    triton_config_text,
    write_mlserver_model,
    write_model_repository,
    write_triton_model,
)
from serve_bench.export._warmup import read_warmup_records, warmup_requests

__all__ = [
    "BATCHING_FIELDS",
    "DEFAULT_WARMUP_BATCH_SIZES",
    "METADATA_FILE",
    "MLSERVER_RUNTIME",
    "WARMUP_FILE",
    "BatchingParametersError",
    "BatchingParams",
    "Conversion",
    "ExportResult",
    "MLServerBatching",
    "ModelFacts",
    "TritonBatching",
    "batching_parameters_text",
    "catalogue_table",
    "check_version",
    "check_warmup_batch_sizes",
    "converted_files",
    "converted_model_path",
    "describe_export",
    "export_model",
    "export_without_tensorflow",
    "feature_tolerance",
    "latest_metadata",
    "list_models",
    "list_versions",
    "mlserver_settings",
    "model_facts",
    "models_config_text",
    "parse_batch_sizes",
    "parse_runtimes",
    "read_metadata",
    "read_warmup_records",
    "relative_difference",
    "triton_config_text",
    "warmup_requests",
    "write_mlserver_model",
    "write_model_repository",
    "write_models_config",
    "write_triton_model",
]
