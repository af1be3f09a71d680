"""Model repositories for the servers nobody here wrote: Triton's and MLServer's own file formats.

    exported_models/triton/<model>/config.pbtxt
    exported_models/triton/<model>/<version>/model.py          (adapters/triton_model.py)
    exported_models/triton/<model>/<version>/serve_bench_runners.py   (serve_bench/runtimes/_runners.py)
    exported_models/triton/<model>/<version>/model.savedmodel/ (the SavedModel, hard-linked)
    .../<version>/model.onnx or model.xml + model.bin            (another runtime's copy instead)
    exported_models/mlserver/<model>/model-settings.json
    exported_models/mlserver/<model>/serve_bench_runtime.py    (adapters/mlserver_runtime.py)
    exported_models/mlserver/<model>/serve_bench_runners.py    (serve_bench/runtimes/_runners.py)

The servers run in an environment of their own (their containers, ``.venv-servers``) that has
no serve-bench: a repository carries the runners' one file beside its adapter, as a container
mounting ``exported_models/`` needs.

``model.savedmodel`` is the name Triton's TensorFlow backend expects too, so the same
version directory serves from the Python backend (what runs here) or the TF backend
(``platform: "tensorflow_savedmodel"``); likewise ``model.onnx`` and ``model.xml`` are the
names of Triton's ONNX Runtime and OpenVINO backends. The files are written in each server's own format:
``config.pbtxt`` is text-format ``inference.ModelConfig`` (triton common
``protobuf/model_config.proto``), ``model-settings.json`` is MLServer's ``ModelSettings``
(``mlserver/settings.py``). ``tune`` writes the same files with other batching values.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serve_bench.catalogue import get_spec
from serve_bench.errors import InvalidValue, UserError
from serve_bench.export._convert import converted_files
from serve_bench.export._layout import list_versions, read_metadata
from serve_bench.runtimes import RUNNERS_FILE, RuntimeRecord, record_in_servers

__all__ = [
    "MLSERVER_RUNTIME",
    "MLServerBatching",
    "TritonBatching",
    "mlserver_settings",
    "triton_config_text",
    "write_mlserver_model",
    "write_model_repository",
    "write_triton_model",
]

_ADAPTERS = Path(__file__).resolve().parent / "adapters"
_RUNNERS_AS = "serve_bench_runners.py"  # the name the adapters import the runners by
MLSERVER_RUNTIME = "serve_bench_runtime.TFSavedModelRuntime"


@dataclass(frozen=True)
class TritonBatching:
    """The batching knobs of a Triton ``config.pbtxt``; every default is Triton's own (cited in
    ``servers/_triton.py``'s knob table, which reads them from here).

    ``dynamic_batching`` False leaves the block out: Triton then runs each request as it
    comes (batches only what one request carries). ``max_queue_delay_us`` 0 and no
    preferred sizes are Triton's own defaults for ``dynamic_batching { }``.
    """

    max_batch_size: int = 4
    dynamic_batching: bool = True
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    instance_count: int = 1
    kind: str = "KIND_CPU"  # KIND_GPU on a GPU host

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise InvalidValue("max_batch_size", self.max_batch_size, "a whole number >= 1")
        if self.max_queue_delay_us < 0:
            raise InvalidValue("max_queue_delay_microseconds", self.max_queue_delay_us, "0 or more")
        if self.instance_count < 1:
            raise InvalidValue("instance_count", self.instance_count, "a whole number >= 1")
        if self.kind not in ("KIND_CPU", "KIND_GPU"):
            raise InvalidValue("instance_kind", self.kind, "KIND_CPU or KIND_GPU")
        for size in self.preferred_batch_sizes:
            # core/src/dynamic_batch_scheduler.cc refuses a preferred size above max_batch_size at load
            if not 1 <= size <= self.max_batch_size:
                raise InvalidValue(
                    "preferred_batch_size", size, f"between 1 and max_batch_size ({self.max_batch_size})"
                )

    def knobs(self) -> dict[str, str]:
        """The configuration as (knob, value) text, for points' ``server_config``."""
        knobs = {"max_batch_size": str(self.max_batch_size), "instance_count": str(self.instance_count)}
        if self.dynamic_batching:
            knobs["max_queue_delay_microseconds"] = str(self.max_queue_delay_us)
            if self.preferred_batch_sizes:
                knobs["preferred_batch_size"] = ",".join(map(str, self.preferred_batch_sizes))
        else:
            knobs["dynamic_batching"] = "off"
        return knobs


@dataclass(frozen=True)
class MLServerBatching:
    """MLServer's adaptive batching (``ModelSettings.max_batch_size`` / ``max_batch_time``) and its worker
    pool; every default is MLServer's own (cited in ``servers/_mlserver.py``'s knob table).

    ``max_batch_size`` 1 (or 0) turns it off: MLServer only batches when it is above 1
    (``mlserver/batching/hooks.py``: ``_get_batching_settings``).
    """

    max_batch_size: int = 0
    max_batch_time_s: float = 0.0
    # server-wide (settings.json): MLServer 1.7.1 ignores a model's own count unless it is <= 0; None: not written
    parallel_workers: int | None = 1

    def __post_init__(self) -> None:
        if self.max_batch_size < 0:
            raise InvalidValue("max_batch_size", self.max_batch_size, "0 or more (0 or 1: no batching)")
        if not (math.isfinite(self.max_batch_time_s) and self.max_batch_time_s >= 0):  # nan passed `< 0`
            raise InvalidValue("max_batch_time", self.max_batch_time_s, "a finite number of seconds, 0 or more")
        if self.parallel_workers is not None and self.parallel_workers < 0:
            raise InvalidValue("parallel_workers", self.parallel_workers, "0 or more")

    def knobs(self) -> dict[str, str]:
        knobs = {"max_batch_size": str(self.max_batch_size), "max_batch_time": f"{self.max_batch_time_s:g}"}
        if self.parallel_workers is not None:
            knobs["parallel_workers"] = str(self.parallel_workers)
        return knobs


@dataclass(frozen=True)
class _Facts:
    version: int
    path: Path
    input_shape: tuple[int, int, int]
    feature_size: int


def _facts(models_dir: Path, model: str, version: int | None) -> _Facts:
    versions = list_versions(models_dir / model)
    if not versions:
        raise UserError(
            f"no exported version of {model!r} under {models_dir}; run: serve-bench export {model} --weights random"
        )
    chosen = versions[-1] if version is None else version
    if chosen not in versions:
        raise UserError(f"{model!r} has no version {chosen} under {models_dir}; it has {versions}")
    path = models_dir / model / str(chosen)
    meta = read_metadata(path) or {}
    if "input_shape" in meta and "feature_size" in meta:
        h, w, c = (int(d) for d in meta["input_shape"])
        return _Facts(chosen, path, (h, w, c), int(meta["feature_size"]))
    spec = get_spec(model)
    return _Facts(chosen, path, spec.input_shape, spec.feature_size)


def triton_config_text(
    model: str,
    input_shape: tuple[int, int, int],
    feature_size: int,
    batching: TritonBatching,
    parameters: dict[str, str] | None = None,
) -> str:
    """A Python-backend ``config.pbtxt`` for one exported model (text-format ``inference.ModelConfig``)."""
    h, w, c = input_shape
    lines = [
        f'name: "{model}"',
        'backend: "python"',
        f"max_batch_size: {batching.max_batch_size}",
        f'input [ {{ name: "images" data_type: TYPE_FP32 dims: [ {h}, {w}, {c} ] }} ]',
        f'output [ {{ name: "features" data_type: TYPE_FP32 dims: [ {feature_size} ] }} ]',
        f"instance_group [ {{ count: {batching.instance_count} kind: {batching.kind} }} ]",
    ]
    if batching.dynamic_batching:
        block = [f"max_queue_delay_microseconds: {batching.max_queue_delay_us}"]
        if batching.preferred_batch_sizes:
            block.insert(0, f"preferred_batch_size: [ {', '.join(map(str, batching.preferred_batch_sizes))} ]")
        lines.append("dynamic_batching { " + " ".join(block) + " }")
    for key, value in (parameters or {}).items():
        lines.append(f'parameters {{ key: "{key}" value: {{ string_value: {json.dumps(value)} }} }}')
    return "\n".join(lines) + "\n"


# what ``serve-bench export`` writes into exported_models/triton and /mlserver for the containers (docker/):
# batches of up to 32, as before the launchers took each server's own defaults, so the images serve what they did
EXPORTED_TRITON = TritonBatching(max_batch_size=32)
EXPORTED_MLSERVER = MLServerBatching(max_batch_size=32, max_batch_time_s=0.002, parallel_workers=None)


def _converted_files(models_dir: Path, runtime: str, model: str, version: int) -> tuple[RuntimeRecord, list[Path]]:
    """``runtime``'s record, and what a repository links beside the SavedModel: nothing for TensorFlow, else
    ``runtime``'s copy (``export --runtimes``; one line saying how when absent)."""
    kept = record_in_servers(runtime)
    return kept, (converted_files(models_dir, runtime, model, version) if kept.converted else [])


def _runner_names(kept: RuntimeRecord) -> dict[str, str]:
    """What an adapter reads to make ``kept``'s runner (nothing for TensorFlow, the adapters' default)."""
    if not kept.converted or kept.runner is None:
        return {}
    return {"runtime": kept.name, "runner": kept.runner.__name__}


def _link_tree(source: Path, destination: Path) -> None:
    """A copy of ``source`` made of hard links where the filesystem allows (a SavedModel is never edited)."""

    shutil.copytree(source, destination, copy_function=_link_file)


def _link_file(src: str | Path, dst: str | Path) -> object:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _triton_files(model_dir: Path, facts: _Facts, kept: RuntimeRecord, converted: list[Path], given: _Given) -> None:
    """``config.pbtxt`` and the version directory: the Python backend's ``model.py``, the runners, and the
    SavedModel or ``runtime``'s copy, linked (``in_place``: symlinked to the export, for throw-away repositories);
    ``parameters`` become ``config.pbtxt`` parameters (``EXECUTION_ENV_PATH``, ``intra_op_threads``)."""
    if model_dir.exists():
        shutil.rmtree(model_dir)
    version_dir = model_dir / str(facts.version)
    version_dir.mkdir(parents=True)
    shutil.copy2(_ADAPTERS / "triton_model.py", version_dir / "model.py")
    shutil.copy2(RUNNERS_FILE, version_dir / _RUNNERS_AS)
    for source in converted:
        destination = version_dir / source.name
        if given.in_place:
            destination.symlink_to(source.resolve())
        else:
            _link_file(source, destination)
    if not converted and given.in_place:
        (version_dir / "model.savedmodel").symlink_to(facts.path.resolve(), target_is_directory=True)
    elif not converted:
        _link_tree(facts.path, version_dir / "model.savedmodel")
    parameters = given.parameters
    if converted:
        parameters = {**parameters, **_runner_names(kept), "model_file": kept.model_file}
    batching = given.batching or EXPORTED_TRITON
    text = triton_config_text(model_dir.name, facts.input_shape, facts.feature_size, batching, parameters)
    (model_dir / "config.pbtxt").write_text(text)


def mlserver_settings(
    model: str, version: int, uri: str, batching: MLServerBatching, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    """MLServer's ``model-settings.json`` (``ModelSettings``) for one exported model."""
    parameters: dict[str, Any] = {"uri": uri, "version": str(version)}
    if extra:
        parameters["extra"] = dict(extra)
    settings: dict[str, Any] = {
        "name": model,
        "implementation": MLSERVER_RUNTIME,
        "max_batch_size": batching.max_batch_size,
        "max_batch_time": batching.max_batch_time_s,
        "parameters": parameters,
    }
    return settings


def _mlserver_files(model_dir: Path, facts: _Facts, kept: RuntimeRecord, converted: list[Path], given: _Given) -> None:
    """``model-settings.json`` and serve-bench's runtime beside it. The settings point at the SavedModel by a
    path relative to the folder (MLServer resolves it so, ``mlserver/utils.py`` ``get_model_uri``), which holds
    inside a container that mounts the whole ``exported_models/``; ``in_place``: an absolute path, for
    repositories written elsewhere. Another ``runtime`` runs the copy ``export --runtimes`` converted (named in
    ``extra.converted`` the same way, its runner in ``extra.runner``); ``parameters`` go to ``extra``."""
    model_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_ADAPTERS / "mlserver_runtime.py", model_dir / "serve_bench_runtime.py")
    shutil.copy2(RUNNERS_FILE, model_dir / _RUNNERS_AS)

    def where(path: Path) -> str:
        return str(path.resolve()) if given.in_place else os.path.relpath(path.resolve(), model_dir.resolve())

    extra = given.parameters
    if converted:
        extra = {**extra, **_runner_names(kept), "converted": where(converted[0])}
    batching = given.batching or EXPORTED_MLSERVER
    settings = mlserver_settings(model_dir.name, facts.version, where(facts.path), batching, extra or None)
    (model_dir / "model-settings.json").write_text(json.dumps(settings, indent=2) + "\n")


@dataclass(frozen=True)
class _Given:
    batching: Any
    parameters: dict[str, str]
    in_place: bool


_WRITERS = {"triton": _triton_files, "mlserver": _mlserver_files}


def write_model_repository(
    server: str,
    models_dir: str | os.PathLike[str],
    model: str,
    repository: str | os.PathLike[str],
    batching: TritonBatching | MLServerBatching | None = None,
    *,
    version: int | None = None,
    parameters: dict[str, str] | None = None,
    in_place: bool = False,
    runtime: str = "tensorflow",
) -> Path:
    """Write ``<repository>/<model>/`` in ``server``'s format (triton | mlserver) from the exported model; return
    that directory. ``batching`` None: what ``serve-bench export`` writes (EXPORTED_TRITON, EXPORTED_MLSERVER).

    ``runtime`` picks what the model runs: the SavedModel (TensorFlow) or the copy ``export --runtimes``
    converted for another runtime with a runner there (UserError when there is none). ``in_place`` points at
    the export where it is (the launchers' repositories) instead of linking it relatively.
    """
    facts = _facts(Path(models_dir), model, version)
    kept, converted = _converted_files(Path(models_dir), runtime, model, facts.version)
    model_dir = Path(repository) / model
    _WRITERS[server](model_dir, facts, kept, converted, _Given(batching, dict(parameters or {}), in_place))
    return model_dir


# Triton's repository (config.pbtxt, the Python backend's model.py) and MLServer's (model-settings.json)
write_triton_model = functools.partial(write_model_repository, "triton")
write_mlserver_model = functools.partial(write_model_repository, "mlserver")
