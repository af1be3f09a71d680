"""Run a tune: for each configuration the search asks for, write its batching file, restart the server,
wait until AVAILABLE, measure every workload point, stop; then answer. Resumable and Ctrl-C safe.

A run directory holds ``points.jsonl`` and ``run.json`` (the sweep's results format; every point's key
starts with its configuration's id and the point records the configuration), ``configs.jsonl`` (one
line per finished configuration: measured, or failed with the last lines of the server's log),
``configs/<id>/`` (the configuration's file in its server's format -- batching_parameters.txt,
config.pbtxt, or model-settings.json with MLServer's settings.json -- and the server's log; Triton and
MLServer keep their model repository in ``server/``), ``answer.json`` and the winner's file:
``best_batching_parameters.txt``, ``best_config.pbtxt`` or ``best_model-settings.json`` (with
``best_settings.json`` when MLServer's workers were tuned); answer.json names it (``best_file``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.client import Client, ServeBenchError, connect
from serve_bench.errors import UserError
from serve_bench.load import InputSet, PointPlan, image_size_of, load_input_data, signature_for_payload
from serve_bench.runtimes import RUNTIMES, record
from serve_bench.stats import (
    BEST_MLSERVER_SERVER_SETTINGS_FILE,
    TUNE_ANSWER_FILE,
    LoadInfo,
    Point,
    ResultsWriter,
    Score,
    TuneAnswer,
    collect_run_metadata,
    read_points,
)
from serve_bench.sweep import measure_point
from serve_bench.tune._answer import answer, config_id_of, score_config
from serve_bench.tune._config import ServerConfig, TuneConfig
from serve_bench.tune._restart import make_restarter
from serve_bench.tune._restarter import Restarter, StartFailed
from serve_bench.tune._search import bayesian_search, coordinate_search, grid_search
from serve_bench.tune._spec import TuneSpec
from serve_bench.tune._v2config import MLServerConfig

__all__ = [
    "CONFIGS_FILE",
    "TuneEvent",
    "TuneOutcome",
    "planned_configs",
    "run_tune",
    "search_budget",
    "workload_levels",
]

CONFIGS_FILE = "configs.jsonl"


@dataclass(frozen=True)
class TuneEvent:
    """Progress: ``kind`` is start | point | done | failed | skipped; ``eta_s`` the time left, estimated."""

    kind: str
    config: str
    index: int  # configurations handled so far in this invocation
    total: int  # configurations the search expects (an estimate for the coordinate search)
    eta_s: float
    point: Point | None = None
    message: str = ""


@dataclass
class TuneOutcome:
    run_dir: Path
    evaluated: list[str] = field(default_factory=list)  # every configuration the search asked for, in order
    measured: list[str] = field(default_factory=list)  # measured by this invocation
    skipped: list[str] = field(default_factory=list)  # finished by an earlier one (--resume)
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    answer: TuneAnswer | None = None
    best_file: Path | None = None


def workload_levels(spec: TuneSpec) -> list[LoadInfo]:
    levels = [LoadInfo("closed", concurrency=c) for c in spec.concurrency]
    return levels + [LoadInfo("open", rate=r, arrival=spec.arrival) for r in spec.rates]


def planned_configs(spec: TuneSpec) -> int:
    """How many configurations the search should measure (the coordinate search: its first pass), with baselines."""
    if spec.method == "grid":
        count = min(len(spec.configs), spec.max_configs or len(spec.configs))
    elif spec.method == "bayesian":
        count = search_budget(spec)
    else:
        count = min(1 + sum(len(values) - 1 for _, values in spec.space), search_budget(spec))
    extra = {c.id for c in spec.baseline_configs().values()} - {c.id for c in spec.configs}
    return count + len(extra)


def search_budget(spec: TuneSpec) -> int:
    """The smarter searches' cap: ``max_configs``, else 40% of the grid, but never less than the coordinate
    search's full pass or the Bayesian search's initial design and one configuration it chose."""
    if spec.max_configs:
        return min(spec.max_configs, len(spec.configs))
    varied = sum(len(values) > 1 for _, values in spec.space)
    floor = 1 + sum(len(values) - 1 for _, values in spec.space) if spec.method == "coordinate" else varied + 2
    return min(len(spec.configs), max(floor, int(0.4 * len(spec.configs))))


def _read_finished(run_dir: Path) -> dict[str, dict[str, Any]]:
    path = run_dir / CONFIGS_FILE
    finished: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                finished[entry["config"]] = entry
    return finished


def _finished_configs(finished: dict[str, dict[str, Any]], spec: TuneSpec, run_dir: Path) -> dict[str, ServerConfig]:
    """The configurations a resumed run finished, by the id each was measured under; UserError, one line, when
    this serve-bench names one differently (jax's configurations had no tag of their own before 2026-11-26,
    and were merged into TensorFlow's): resuming would file one's points under the other's name."""
    configs = {cid: spec.family.config_from(e["knobs"]) for cid, e in finished.items()}
    for cid, config in configs.items():
        if config.id != cid:
            raise UserError(
                f"{run_dir / CONFIGS_FILE}: configuration {cid!r} is {config.id!r} to this serve-bench, so its "
                "points cannot be resumed under either name; tune into a new run directory"
            )
    return configs


def _record(point: Point, config: ServerConfig) -> Point:
    """The point with its configuration recorded (a Point field once the results model has one, else a note)."""
    pairs = config.knobs()
    if "server_config" in {f.name for f in dataclasses.fields(Point)}:
        return dataclasses.replace(point, server_config=pairs)
    return point.with_notes("server_config " + ",".join(f"{k}={v}" for k, v in pairs))


class _Tuner:
    def __init__(
        self,
        spec: TuneSpec,
        run_dir: Path,
        restarter: Restarter,
        resume: bool,
        on_event: Callable[[TuneEvent], None] | None,
    ) -> None:
        self.spec = spec
        self.run_dir = run_dir
        self.restarter = restarter
        self.on_event = on_event or (lambda event: None)
        self.outcome = TuneOutcome(run_dir)
        self.finished = _read_finished(run_dir) if resume else {}
        points = [p for p in read_points(run_dir)] if resume and (run_dir / "points.jsonl").exists() else []
        self.points: dict[str, list[Point]] = {}
        for point in points:
            self.points.setdefault(config_id_of(point), []).append(point)
        self.configs: dict[str, ServerConfig] = _finished_configs(self.finished, spec, run_dir)
        self.writer: ResultsWriter | None = None
        self.total = planned_configs(spec)
        self.spent: list[float] = []
        self.handled = 0
        self.input_set: InputSet | None = None

    def eta(self) -> float:
        per_point = self.spec.settings.warmup_s + self.spec.settings.min_duration_s + 0.5
        per_config = (
            sum(self.spent) / len(self.spent) if self.spent else 10.0 + per_point * len(workload_levels(self.spec))
        )
        return max(0, self.total - self.handled) * per_config

    def emit(self, kind: str, config: str, point: Point | None = None, message: str = "") -> None:
        self.on_event(TuneEvent(kind, config, self.handled, max(self.total, self.handled), self.eta(), point, message))

    def _finish(self, config: ServerConfig, status: str, **extra: Any) -> None:
        entry = {"config": config.id, "knobs": dataclasses.asdict(config), "status": status, **extra}
        with open(self.run_dir / CONFIGS_FILE, "a") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
        self.finished[config.id] = entry

    def _score(self, config: ServerConfig) -> Score:
        entry = self.finished[config.id]
        if entry["status"] == "failed":
            return Score(config.id, False, failed=entry.get("why", "did not start"))
        return score_config(config.id, self.points.get(config.id, ()), self.spec.slo, self.spec.at_rate)

    async def evaluate(self, config: ServerConfig) -> Score:
        self.configs[config.id] = config
        if config.id in self.outcome.evaluated:
            if config.id in self.finished:  # asked twice (a baseline that is also in the grid): measured once
                return self._score(config)
        else:
            self.outcome.evaluated.append(config.id)
        if config.id in self.finished:
            self.outcome.skipped.append(config.id)
            self.emit("skipped", config.id, message=self.finished[config.id]["status"])
            return self._score(config)
        self.emit("start", config.id)
        started = time.perf_counter()
        await self._measure(config)
        self.spent.append(time.perf_counter() - started)
        self.handled += 1
        return self._score(config)

    async def _measure(self, config: ServerConfig) -> None:
        spec = self.spec
        assert self.writer is not None
        folder = self.run_dir / "configs" / config.id
        folder.mkdir(parents=True, exist_ok=True)
        batching_file = folder / spec.family.config_file
        if isinstance(config, TuneConfig):  # Triton's and MLServer's restarters write theirs with the launcher
            batching_file.write_text(config.to_text())
        log_path = folder / "server.log"
        started = time.perf_counter()
        try:
            target = await self.restarter.start(config, batching_file, log_path)
        except StartFailed as exc:
            self.outcome.failed[config.id] = exc.why
            self._finish(config, "failed", why=exc.why, log_tail=list(exc.log_tail))
            self.emit("failed", config.id, message=exc.why + "".join(f"\n    {line}" for line in exc.log_tail[-5:]))
            return
        startup_s = time.perf_counter() - started
        try:
            server = spec.server
            target = dataclasses.replace(
                target,
                name=config.id,
                price_per_hour=server.price_per_hour,
                currency=spec.currency,
                telemetry=server.telemetry,
            )
            signature = signature_for_payload(spec.payload, spec.signature)
            done = {p.key for p in self.points.get(config.id, ())}
            try:
                client = await connect(target.url, spec.model, signature, timeout=spec.settings.timeout_s)
            except ServeBenchError as exc:
                why = f"AVAILABLE but not usable: {exc}"
                self.outcome.failed[config.id] = why
                self._finish(config, "failed", why=why, log_tail=[])
                self.emit("failed", config.id, message=why)
                return
            try:
                inputs = await self._inputs(client)
                for load in workload_levels(spec):
                    plan = PointPlan(target, spec.model, signature, spec.payload, spec.batch_size, load, 0, spec.seed)
                    if plan.key in done:
                        continue
                    point = _record(await measure_point(client, plan, spec.settings, inputs=inputs), config)
                    self.writer.append(point)
                    self.points.setdefault(config.id, []).append(point)
                    self.emit("point", config.id, point)
            finally:
                await client.aclose()
        finally:
            await self.restarter.stop()
        self.outcome.measured.append(config.id)
        self._finish(config, "measured", startup_s=round(startup_s, 2), points=len(self.points.get(config.id, ())))
        self.emit("done", config.id)

    async def _inputs(self, client: Client) -> InputSet | None:
        """The spec's real images, read once for the whole tune (None: synthetic images)."""
        if not self.spec.input_data:
            return None
        if self.input_set is None:
            image_size = image_size_of(client.signatures.get("serving_default"))
            self.input_set = await asyncio.to_thread(
                load_input_data, self.spec.input_data, self.spec.payload, image_size
            )
        return self.input_set

    async def run(self) -> TuneOutcome:
        spec = self.spec
        self.writer = ResultsWriter(self.run_dir)
        try:
            self.writer.write_run(
                collect_run_metadata(
                    spec.text,
                    spec_name=spec.name,
                    model=spec.model,
                    run_dir=str(self.run_dir),
                    tune=True,
                    slo={**dataclasses.asdict(spec.slo), "at_rate": spec.at_rate},
                    settings=spec.settings.__dict__,
                )
            )
            for baseline in spec.baseline_configs().values():
                await self.evaluate(baseline)
            mode = "latency" if spec.at_rate is not None else "throughput"
            if spec.method == "grid":
                await grid_search(spec.configs, self.evaluate, spec.max_configs)
            elif spec.method == "bayesian":
                budget = search_budget(spec)
                await bayesian_search(
                    spec.space, self.evaluate, mode, budget, source=spec.name, build=spec.family.config_of
                )
            else:
                budget = search_budget(spec)
                await coordinate_search(
                    spec.space,
                    self.evaluate,
                    mode,
                    spec.order,
                    budget,
                    source=spec.name,
                    build=spec.family.config_of,
                    recipe=spec.family.recipe,
                )
        except BaseException:
            self.outcome.interrupted = True
            raise
        finally:
            self.writer.close()
            await self.restarter.close()
            try:
                self.outcome.answer = self.conclude()
            except Exception as exc:  # never hide why the run stopped behind a failing summary
                if not self.outcome.interrupted:
                    raise
                self.outcome.answer = None
                del exc
        return self.outcome

    def conclude(self) -> TuneAnswer:
        """The answer over every configuration finished in this run directory; writes answer.json and the best file."""
        family = self.spec.family
        failed = {cid: e.get("why", "") for cid, e in self.finished.items() if e["status"] == "failed"}
        finished = {cid: c for cid, c in self.configs.items() if cid in self.finished}
        named: dict[str, list[str]] = {}  # MLServer's two baselines are one configuration: one comparison
        for name, config in {**family.baselines, **self.spec.baseline_configs()}.items():
            if config.id in finished:
                named.setdefault(config.id, []).append(name)
        baselines = {" and ".join(names): cid for cid, names in named.items()}
        result = answer(
            self.points, finished, failed, self.spec.slo, baselines, [k for k, _ in self.spec.space], self.spec.at_rate
        )
        winner = result.best or result.closest
        if winner is not None and winner.config in finished:  # the defaults on another runtime than the winner's
            other = [f"defaults on {r}" for r in RUNTIMES if r != finished[winner.config].runtime]
            kept = tuple(g for g in result.gains if not any(o in g.baseline for o in other))
            result = dataclasses.replace(result, gains=kept)
        files = self._best_files(finished[winner.config], winner, result) if winner and not winner.failed else {}
        written = dataclasses.replace(
            result,
            evaluated=tuple(self.outcome.evaluated),
            configs={cid: dict(c.knobs()) for cid, c in finished.items()},
            best_files=tuple(files),  # the winner's file(s) in its server's format (the report shows them)
        )
        written.write(self.run_dir / TUNE_ANSWER_FILE)
        for name, text in files.items():
            (self.run_dir / name).write_text(text)
        if files:
            self.outcome.best_file = self.run_dir / next(iter(files))
        return result

    def _best_files(self, config: ServerConfig, winner: Score, result: TuneAnswer) -> dict[str, str]:
        """The winner's file(s), name -> text: TF Serving's batching file, or the very file Triton or MLServer
        loaded for it (configs/<id>/), so what is recommended is what was measured."""
        family = self.spec.family
        verdict = "best" if result.best else "closest (misses the SLO)"
        head = (
            f"# serve-bench tune {self.spec.name}: {verdict} configuration {config.id}\n"
            f"# {winner.describe(self.spec.slo.percentile)}\n"
        )
        if isinstance(config, TuneConfig):
            flags = " ".join(config.server_flags("/config/batching.txt"))
            body = config.to_text() or "# batching off: run without a batching file (--enable_batching=false)\n"
            # --runtime is serve-bench serve's flag: TF Serving itself runs SavedModels only
            server = "serve-bench serve" if record(config.runtime).converted else "tensorflow_model_server"
            return {family.best_file: f"{head}# {server} flags: {flags}\n{body}"}
        loaded = self.run_dir / "configs" / config.id / family.config_file
        if not loaded.exists():  # a run directory whose configs/ was removed: nothing faithful to copy
            return {}
        if not isinstance(config, MLServerConfig):
            note = (
                f"# the config.pbtxt tritonserver loaded for it ({loaded.relative_to(self.run_dir)}); its parameters\n"
                "# are this host's (EXECUTION_ENV_PATH: the Python backend's environment)\n"
            )
            return {family.best_file: head + note + loaded.read_text()}
        files = {family.best_file: loaded.read_text()}  # JSON: no room for a comment; answer.json says which
        if "parallel_workers" in dict(self.spec.space):
            # MLServer 1.7.1 reads the worker count from the server's settings.json, not the model's
            files[BEST_MLSERVER_SERVER_SETTINGS_FILE] = json.dumps({"parallel_workers": config.parallel_workers}) + "\n"
        return files


async def run_tune(
    spec: TuneSpec,
    run_dir: Path,
    *,
    resume: bool = False,
    restarter: Restarter | None = None,
    on_event: Callable[[TuneEvent], None] | None = None,
) -> TuneOutcome:
    """Search ``spec``'s configurations, measuring each not yet finished in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tuner = _Tuner(spec, run_dir, restarter or make_restarter(spec.server, spec.model, run_dir), resume, on_event)
    return await tuner.run()
