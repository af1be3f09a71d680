"""Predict: latency and images/s on devices not at hand, from the graph's costs and published peaks.

``cost_saved_model`` walks an exported model's serving graph (FLOPs and elements moved per op);
``predict`` turns those costs into time per batch on a device of the shipped table, with
efficiencies fitted on published measurements and the error that fit showed on devices left out
of it (``calibration``, ``leave_one_device_out``). Every prediction names the shipped fit it was made
with and that fit's content hash (``shipped_version``), so a refit cannot pass for a frozen one, and
carries the error to expect on its device (``expected_error``): the 10th-90th percentiles of the
held-out errors of the nearest calibrated architecture, how the same fit did on published tables no
fit has used (``_outofsample``), and what served tables say of the copy term.
"""

from serve_bench.predict._calibrate import CpuCalibration, calibrate_cpu, cpu_points, fit_cpu
from serve_bench.predict._devices import PRECISIONS, Device, device_table, get_device
from serve_bench.predict._expected import ExpectedError, expected_error
from serve_bench.predict._freeze import FIT_VERSION, ModelVersion, content_hash
from serve_bench.predict._graph import GraphCost, OpCost, cost_graph, cost_saved_model, fuse_pointwise
from serve_bench.predict._host import (
    CALL_MS,
    CALL_MS_SOURCE,
    CpuSpec,
    cpu_device,
    measure_bandwidth,
    parse_cpu,
    read_host_cpu,
)
from serve_bench.predict._model import Efficiency, Observation, fit, time_per_batch
from serve_bench.predict._predict import (
    BATCH_SIZES,
    Prediction,
    predict,
    shipped_inputs,
    shipped_tables,
    shipped_version,
)
from serve_bench.predict._published import (
    TABLES,
    Calibration,
    HeldOut,
    LeaveOneOut,
    calibration,
    check_tables,
    fitted,
    leave_one_device_out,
    leave_one_model_out,
    published_observations,
    run_by,
)
from serve_bench.predict._reference import ARCHITECTURES, build_cost, reference_costs

__all__ = [
    "ARCHITECTURES",
    "BATCH_SIZES",
    "CALL_MS",
    "CALL_MS_SOURCE",
    "FIT_VERSION",
    "PRECISIONS",
    "TABLES",
    "Calibration",
    "CpuCalibration",
    "CpuSpec",
    "Device",
    "Efficiency",
    "ExpectedError",
    "GraphCost",
    "HeldOut",
    "LeaveOneOut",
    "ModelVersion",
    "Observation",
    "OpCost",
    "Prediction",
    "build_cost",
    "calibrate_cpu",
    "calibration",
    "check_tables",
    "content_hash",
    "cost_graph",
    "cost_saved_model",
    "cpu_device",
    "cpu_points",
    "device_table",
    "expected_error",
    "fit",
    "fit_cpu",
    "fitted",
    "fuse_pointwise",
    "get_device",
    "leave_one_device_out",
    "leave_one_model_out",
    "measure_bandwidth",
    "parse_cpu",
    "predict",
    "published_observations",
    "read_host_cpu",
    "reference_costs",
    "run_by",
    "shipped_inputs",
    "shipped_tables",
    "shipped_version",
    "time_per_batch",
]
