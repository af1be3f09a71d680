"""Run a sweep: every grid point, appended to points.jsonl as it ends, resumable."""

from __future__ import annotations

import asyncio
import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from serve_bench.client import Client, ConnectError, ServeBenchError, connect
from serve_bench.errors import UserError
from serve_bench.export._layout import latest_metadata
from serve_bench.load import signature_for_payload
from serve_bench.stats import LoadInfo, Point, ResultsWriter, collect_run_metadata, read_points
from serve_bench.sweep._measure import PointPlan, Target, measure_point
from serve_bench.sweep._spec import SweepSpec

__all__ = ["SweepOutcome", "plan_points", "run_sweep", "new_run_dir", "latest_run_dir"]

# statuses that mean the server is gone rather than refusing one request
_DEAD = {"ConnectError", "UNAVAILABLE"}


@dataclass
class SweepOutcome:
    run_dir: Path
    measured: list[Point] = field(default_factory=list)
    skipped: int = 0
    failed_targets: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False


def plan_points(spec: SweepSpec) -> list[PointPlan]:
    plans = []
    for target in spec.targets:
        for payload in spec.payloads:
            signature = signature_for_payload(payload, spec.signature)
            for batch in spec.batch_sizes:
                levels = [LoadInfo("closed", concurrency=c, processes=spec.processes) for c in spec.concurrency]
                levels += [LoadInfo("open", rate=float(r), arrival=spec.arrival, processes=spec.processes)
                           for r in spec.rates]
                if batch == 1:
                    levels += [LoadInfo("closed", concurrency=c, processes=spec.processes)
                               for c in spec.server_batching_concurrency if c not in spec.concurrency]
                for load in levels:
                    for repeat in range(spec.repeats):
                        plans.append(PointPlan(target, spec.model, signature, payload, batch, load, repeat,
                                               spec.seed + repeat))
    return plans


def new_run_dir(spec: SweepSpec) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(spec.out) / f"{spec.name}-{stamp}"


def latest_run_dir(spec: SweepSpec) -> Path | None:
    root = Path(spec.out)
    runs = sorted(root.glob(f"{spec.name}-*")) if root.is_dir() else []
    return runs[-1] if runs else None


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
                        target.url, spec.model, signature, spec.version, timeout=spec.settings.timeout_s)
                except ServeBenchError as exc:
                    raise UserError(f"target {target.name!r} ({target.url}) is not usable: {exc}") from exc
    except BaseException:
        for client in clients.values():
            await client.aclose()
        raise
    return clients


def _slo_value(point: Point, percentile: str) -> float:
    return point.latency_us.get(percentile, float("inf")) / 1000.0


def _meets(point: Point, spec: SweepSpec) -> bool:
    assert spec.slo is not None
    return point.counts["ok"] > 0 and point.error_count == 0 and _slo_value(point, spec.slo.percentile) <= spec.slo.max_ms


async def run_sweep(spec: SweepSpec, run_dir: Path, *, resume: bool = False,
                    on_point: Callable[[PointPlan, Point | None, int, int, float], None] | None = None) -> SweepOutcome:
    """Measure every point not yet in ``run_dir``; ``on_point(plan, point, done, total, eta_s)`` reports progress."""
    outcome = SweepOutcome(run_dir)
    done_keys: set[str] = set()
    if resume and (run_dir / "points.jsonl").exists():
        done_keys = {p.key for p in read_points(run_dir)}
    plans = plan_points(spec)
    todo = [p for p in plans if p.key not in done_keys]
    outcome.skipped = len(plans) - len(todo)
    clients = await _open_clients(spec)
    writer = ResultsWriter(run_dir)
    try:
        writer.write_run(collect_run_metadata(
            spec.text, spec_name=spec.name, model=spec.model, run_dir=str(run_dir),
            targets=[t.__dict__ for t in spec.targets], slo=spec.slo.__dict__ if spec.slo else None,
            settings=spec.settings.__dict__, model_facts=latest_metadata(Path("exported_models"), spec.model)))
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
            point = await measure_point(clients[(plan.target.name, plan.signature)], plan, spec.settings)
            spent.append(time.perf_counter() - started)
            writer.append(point)
            outcome.measured.append(point)
            if on_point:
                on_point(plan, point, index + 1, len(todo), eta(len(todo) - index - 1))
            if point.counts["ok"] == 0 and set(point.counts["errors"]) & _DEAD:
                outcome.failed_targets[plan.target.name] = f"no answers at {plan.key}: {point.counts['errors']}"
                if spec.stop_on_error:
                    break
            elif point.error_count and spec.stop_on_error:
                break
        if spec.slo and spec.slo.search and spec.rates:
            await _slo_search(spec, clients, writer, outcome, done_keys)
    except (KeyboardInterrupt, asyncio.CancelledError):
        outcome.interrupted = True
        raise
    finally:
        writer.close()
        for client in clients.values():
            try:
                await asyncio.shield(client.aclose())
            except (ServeBenchError, asyncio.CancelledError, ConnectError):
                pass
    return outcome


async def _slo_search(spec: SweepSpec, clients: dict[tuple[str, str], Client], writer: ResultsWriter,
                      outcome: SweepOutcome, done_keys: set[str]) -> None:
    """Bisect the open-loop rate between the best passing and the first failing measured rate."""
    assert spec.slo is not None
    by_group: dict[tuple[str, str, int], list[Point]] = {}
    for point in outcome.measured:
        if point.load.mode == "open":
            by_group.setdefault((point.target.name, point.payload, point.batch_size), []).append(point)
    targets = {t.name: t for t in spec.targets}
    for (target_name, payload, batch), points in by_group.items():
        if target_name in outcome.failed_targets:
            continue
        passing = [p.load.rate or 0 for p in points if _meets(p, spec)]
        failing = [p.load.rate or 0 for p in points if not _meets(p, spec)]
        low = max(passing) if passing else 0.0
        above = [r for r in failing if r > low]
        high = min(above) if above else None
        if high is None or low == 0.0:
            continue  # the SLO holds at every measured rate, or at none
        signature = signature_for_payload(payload, spec.signature)
        for step in range(spec.slo.search_steps):
            rate = round((low + high) / 2, 3)
            plan = PointPlan(targets[target_name], spec.model, signature, payload, batch,
                             LoadInfo("open", rate=rate, arrival=spec.arrival, processes=spec.processes),
                             0, spec.seed)
            if plan.key in done_keys:
                continue
            point = await measure_point(clients[(target_name, signature)], plan, spec.settings)
            point.notes.append(f"slo-search step {step + 1}")
            writer.append(point)
            outcome.measured.append(point)
            if _meets(point, spec):
                low = rate
            else:
                high = rate
