"""Run a sweep: every grid point, appended to points.jsonl as it ends, resumable.

Resume skips a grid point only when the run already holds a usable measurement of
it; a point with no successes, one cut off (the target went down) or one measured on
another runtime than the spec now gives its target is measured again, and the new
line supersedes the old one (which stays in the file).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from serve_bench.client import Client, ServeBenchError, connect, user_error
from serve_bench.errors import InvalidValue, UserError
from serve_bench.export import list_versions, read_metadata
from serve_bench.load import (
    InputSet,
    PointPlan,
    RequestCost,
    image_size_of,
    load_input_data,
    signature_for_payload,
)
from serve_bench.metrics import TelemetrySession
from serve_bench.runtimes import DEFAULT_RUNTIME
from serve_bench.stats import (
    LoadInfo,
    Point,
    ResultsWriter,
    Target,
    collect_run_metadata,
    read_points,
    stamped_run_dir,
)
from serve_bench.sweep._launch import launched_targets
from serve_bench.sweep._measure import check_bounds, measure_idle_power, measure_point, open_telemetry, request_cost
from serve_bench.sweep._outcome import check_a_sweep_s_run, check_measured_alike
from serve_bench.sweep._spec import SweepSpec

__all__ = ["OnPoint", "SweepOutcome", "new_run_dir", "plan_points", "run_sweep"]

# on_point(plan, point, done, total, eta_s): point is None when the plan starts, the Point when it ends
OnPoint = Callable[[PointPlan, "Point | None", int, int, float], None]


@dataclass
class SweepOutcome:
    run_dir: Path
    measured: list[Point] = field(default_factory=list)
    skipped: int = 0  # grid points already measured (resume)
    remeasured: int = 0  # grid points whose earlier measurement was unusable (resume)
    failed_targets: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


def plan_points(spec: SweepSpec) -> list[PointPlan]:
    plans = []
    for target in spec.targets:
        for payload in spec.payloads:
            signature = signature_for_payload(payload, spec.signature)
            for batch in spec.batch_sizes:
                for load in spec.levels(batch):
                    for repeat in range(spec.repeats):
                        plans.append(
                            PointPlan(target, spec.model, signature, payload, batch, load, repeat, spec.seed + repeat)
                        )
    return plans


def new_run_dir(spec: SweepSpec) -> Path:
    """A new run directory of the spec: ``<out>/<name>-<time>`` (stats.stamped_run_dir)."""
    return stamped_run_dir(spec.out, spec.name)


def _model_facts(models_dir: Path | None, model: str) -> dict[str, Any] | None:
    versions = list_versions(models_dir / model) if models_dir is not None else []
    return read_metadata(models_dir / model / str(versions[-1])) if models_dir is not None and versions else None


def _estimate(spec: SweepSpec) -> float:
    return spec.settings.warmup_s + spec.settings.min_duration_s + 0.5


async def _open_clients(spec: SweepSpec) -> dict[tuple[str, str], Client]:
    """Connect to every target first: an unreachable one fails the sweep before anything is measured."""
    clients: dict[tuple[str, str], Client] = {}
    signatures = {signature_for_payload(p, spec.signature) for p in spec.payloads}
    try:
        for target in spec.targets:
            for signature in sorted(signatures):
                try:
                    clients[(target.name, signature)] = await connect(
                        target.url, spec.model, signature, spec.version, timeout=spec.settings.timeout_s
                    )
                except ServeBenchError as exc:
                    raise user_error(exc, f"target {target.name!r} ({target.url}) is not usable") from exc
    except BaseException:
        for client in clients.values():
            await client.aclose()
        raise
    return clients


class _Sweep:
    """One sweep's state: the clients, the writer, what the run already holds, and the outcome."""

    def __init__(
        self,
        spec: SweepSpec,
        clients: dict[tuple[str, str], Client],
        writer: ResultsWriter,
        previous: dict[str, Point],
        outcome: SweepOutcome,
    ) -> None:
        self.spec = spec
        self.clients = clients
        self.writer = writer
        self.previous = previous
        self.outcome = outcome
        self.input_sets: dict[tuple[str, tuple[int, int]], InputSet] = {}
        self.telemetry: dict[str, TelemetrySession | None] = {}  # per target, opened at its first point

    async def session(self, target: Target) -> TelemetrySession | None:
        """The target's telemetry session; its idle power is measured before the target's first point."""
        if target.name not in self.telemetry:
            session = open_telemetry(target)
            if session is not None:
                await measure_idle_power(session, target)
            self.telemetry[target.name] = session
        return self.telemetry[target.name]

    def usable(self, key: str) -> Point | None:
        """The run's current measurement of ``key`` when it says something about the server."""
        point = self.previous.get(key)
        return point if point is not None and _reusable(point, self.spec) else None

    async def inputs(self, client: Client, payload: str) -> InputSet | None:
        """The spec's input data for this payload and the model's image size (loaded once), or None."""
        if not self.spec.input_data:
            return None
        key = (payload, image_size_of(client.signatures.get("serving_default")))
        if key not in self.input_sets:
            self.input_sets[key] = await asyncio.to_thread(load_input_data, self.spec.input_data, *key)
        return self.input_sets[key]

    async def measure(self, plan: PointPlan, *notes: str) -> Point:
        client = self.clients[(plan.target.name, plan.signature)]
        point = await measure_point(
            client, plan, self.spec.settings, await self.session(plan.target), await self.inputs(client, plan.payload)
        )
        launch = self.spec.launches.get(plan.target.name)
        if launch is not None:  # what serve-bench started this server with
            point = dataclasses.replace(point, server_config=launch.knob_pairs())
        old = self.previous.get(plan.key)
        if old is not None:  # unusable earlier measurement: this one replaces it
            point = point.superseding(old)
            self.outcome.remeasured += 1
        if notes:
            point = point.with_notes(*notes)
        self.writer.append(point)
        self.previous[plan.key] = point
        self.outcome.measured.append(point)
        return point

    def target_failed(self, plan: PointPlan, point: Point) -> bool:
        """Record a target that went down (the generator cut the point off); True when the sweep stops."""
        if point.cut_off:
            self.outcome.failed_targets[plan.target.name] = f"{point.cut_off} (at {plan.key})"
            return self.spec.stop_on_error
        return bool(point.error_count) and self.spec.stop_on_error


async def run_sweep(
    spec: SweepSpec,
    run_dir: Path,
    *,
    resume: bool = False,
    on_point: OnPoint | None = None,
    models_dir: Path | None = None,
) -> SweepOutcome:
    """Measure every point not yet (usably) in ``run_dir``; then the SLO rate search, if the spec asks.

    ``models_dir`` is where the model was exported: its export facts (FLOPs per
    image, weights) go into run.json for the report.
    """
    outcome = SweepOutcome(run_dir)
    # A folder that is there may be another sweep's, still measuring (a --resume typed too soon, a twin started
    # in the same second): its writer's lock refuses this one now, before it starts servers beside that run's
    # or connects. A new folder is made by the writer only once the targets answer (a refused sweep leaves none).
    writer = ResultsWriter(run_dir) if run_dir.is_dir() else None
    try:
        earlier = read_points(run_dir) if writer is not None else []  # the writer made points.jsonl if it was not
        if earlier:  # one folder: a sweep's, points measured alike and each key once
            check_a_sweep_s_run(run_dir)
            if not resume:
                raise UserError(
                    f"{run_dir} already holds points; continue that run with --resume, or choose another --run-dir"
                )
            check_measured_alike(
                run_dir,
                spec.settings,
                "resume it with the [durations] it was measured with, or choose another --run-dir",
            )
        previous = {p.key: p for p in earlier}  # the latest measurement of each key
        if spec.launches:
            with launched_targets(
                spec.targets, spec.launches, Path(spec.models_dir), spec.model, run_dir
            ) as targets:  # started before the first point, stopped after the last
                launched = dataclasses.replace(spec, targets=targets)
                return await _run(launched, run_dir, outcome, previous, on_point, models_dir, writer)
        return await _run(spec, run_dir, outcome, previous, on_point, models_dir, writer)
    finally:
        if writer is not None:
            writer.close()


def _reusable(point: Point, spec: SweepSpec) -> bool:
    """Whether resume may keep an earlier measurement: it reached the server and ran on the runtime
    the spec now names for its target (a target renamed to another runtime is measured again)."""
    wanted = {t.name: t.runtime for t in spec.targets}.get(point.target.name, point.target.runtime)
    # a point from before runtimes were recorded (schema 4 and older) ran on the default: nothing else served then
    ran = point.target.runtime or DEFAULT_RUNTIME
    return not point.needs_remeasure and (point.target.runtime == wanted or ran == wanted)


# the spec's key for each parameter a bound names (InvalidValue.name)
_SPEC_KEYS = {
    "batch_size": "batch_sizes",
    "concurrency": "load.concurrency",
    "rate": "load.rates",
    "processes": "load.processes",
    "max_duration_s": "durations.max_duration_s",
}


async def _check_bounds(sweep: _Sweep, plans: list[PointPlan]) -> None:
    """Every point's bounds (load._bounds) before the first is measured, so a batch the client cannot hold
    is refused at once, naming the spec's key, not an hour into the grid."""
    costs: dict[tuple[str, str, str], RequestCost] = {}
    for plan in plans:
        client = sweep.clients[(plan.target.name, plan.signature)]
        inputs = await sweep.inputs(client, plan.payload)
        key = (plan.target.name, plan.signature, plan.payload)
        if key not in costs:
            costs[key] = request_cost(client, plan, inputs)
        try:
            check_bounds(client, plan, sweep.spec.settings, inputs, costs[key])
        except InvalidValue as exc:
            named = exc.named(_SPEC_KEYS.get(exc.name, exc.name))
            raise UserError(f"sweep {sweep.spec.name}, point {plan.key}: {named}") from None


async def _run(
    spec: SweepSpec,
    run_dir: Path,
    outcome: SweepOutcome,
    previous: dict[str, Point],
    on_point: OnPoint | None,
    models_dir: Path | None,
    writer: ResultsWriter | None = None,
) -> SweepOutcome:
    plans = plan_points(spec)
    todo = [p for p in plans if p.key not in previous or not _reusable(previous[p.key], spec)]
    outcome.skipped = len(plans) - len(todo)
    clients = await _open_clients(spec)
    if writer is None:
        try:
            writer = ResultsWriter(run_dir)
        except UserError:  # another writer took the folder since run_sweep looked (a twin's exact second)
            for client in clients.values():
                await client.aclose()
            raise
    sweep = _Sweep(spec, clients, writer, previous, outcome)
    try:
        await _check_bounds(sweep, todo)
        writer.write_run(
            collect_run_metadata(
                spec.text,
                spec_name=spec.name,
                model=spec.model,
                run_dir=str(run_dir),
                targets=[t.__dict__ for t in spec.targets],
                slo={"percentile": spec.slo.percentile, "max_ms": spec.slo.max_ms} if spec.slo else None,
                settings=spec.settings.__dict__,
                model_facts=_model_facts(models_dir, spec.model),
            )
        )
        spent: list[float] = []  # seconds each finished point took: the ETA learns from them

        def eta(left: int) -> float:
            per_point = sum(spent) / len(spent) if spent else _estimate(spec)
            return per_point * left

        for index, plan in enumerate(todo):
            if plan.target.name in outcome.failed_targets:
                continue
            if on_point:
                on_point(plan, None, index, len(todo), eta(len(todo) - index))
            started = time.perf_counter()
            point = await sweep.measure(plan)
            spent.append(time.perf_counter() - started)
            if on_point:
                on_point(plan, point, index + 1, len(todo), eta(len(todo) - index - 1))
            if sweep.target_failed(plan, point):
                break
        if spec.slo is not None and spec.slo_search_steps and spec.rates:
            await _slo_search(sweep)
    except (KeyboardInterrupt, asyncio.CancelledError):
        outcome.interrupted = True
        raise
    finally:
        writer.close()
        for session in sweep.telemetry.values():
            if session is not None:
                session.close()
        for client in clients.values():
            try:
                await asyncio.shield(client.aclose())
            except (ServeBenchError, asyncio.CancelledError):
                pass
    return outcome


async def _slo_search(sweep: _Sweep) -> None:
    """Bisect the open-loop rate between the best passing and the first failing rate, per target/payload/batch.

    It starts from the grid's usable open-loop points (measured now or before a
    resume); a step whose rate the run already measured reuses that point, so a
    resumed search continues where it stopped instead of repeating a step.
    """
    spec = sweep.spec
    slo = spec.slo
    assert slo is not None
    # the search starts from the grid's open-loop points only: starting from earlier search steps
    # would narrow the first bracket and bisect to other rates than the run already holds
    groups: dict[tuple[str, str, int], list[Point]] = {}
    for plan in plan_points(spec):
        point = sweep.usable(plan.key)
        if plan.load.mode == "open" and point is not None:
            groups.setdefault((plan.target.name, plan.payload, plan.batch_size), []).append(point)
    targets = {t.name: t for t in spec.targets}
    for (target_name, payload, batch), points in groups.items():
        if target_name in sweep.outcome.failed_targets or target_name not in targets:
            continue
        passing = [p.load.rate or 0.0 for p in points if slo.met_by(p)]
        failing = [p.load.rate or 0.0 for p in points if not slo.met_by(p)]
        low = max(passing) if passing else 0.0
        above = [r for r in failing if r > low]
        high = min(above) if above else None
        if high is None or low == 0.0:
            continue  # the SLO holds at every measured rate, or at none
        signature = signature_for_payload(payload, spec.signature)
        for step in range(spec.slo_search_steps):
            rate = round((low + high) / 2, 3)
            plan = PointPlan(
                targets[target_name],
                spec.model,
                signature,
                payload,
                batch,
                LoadInfo("open", rate=rate, arrival=spec.arrival, processes=spec.processes),
                0,
                spec.seed,
            )
            point = sweep.usable(plan.key) or await sweep.measure(plan, f"slo-search step {step + 1}")
            if sweep.target_failed(plan, point) or target_name in sweep.outcome.failed_targets:
                break
            if slo.met_by(point):
                low = rate
            else:
                high = rate
