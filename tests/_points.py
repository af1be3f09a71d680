"""Synthetic points with known figures, for tests of the results model and the report."""

from __future__ import annotations

from serve_bench.stats import (
    ClientView,
    Codec,
    Counts,
    Latency,
    LoadInfo,
    Percentiles,
    Point,
    Stability,
    Target,
    Throughput,
    encode,
    histogram_of,
    point_key,
)


def make_point(
    target: str,
    device: str,
    batch: int,
    latency_us: float,
    concurrency: int = 1,
    p99_factor: float = 1.2,
    stable: bool = True,
    errors: int = 0,
    ok: int | None = None,
    cut_off: str = "",
    model: str = "inception_v3",
    repeat: int = 0,
    payload: str = "float",
) -> Point:
    """A closed-loop point whose requests all took ``latency_us`` (p99 = factor × that).

    ``concurrency`` requests in flight, each taking ``latency_us``: requests/s = concurrency / latency.
    ``payload`` jpeg sends to ``serving_bytes``, as the clients do.
    """
    signature = "serving_bytes" if payload == "jpeg" else "serving_default"
    requests_per_s = concurrency / (latency_us / 1e6)
    load = LoadInfo("closed", concurrency=concurrency)
    answered = 100 - errors if ok is None else ok
    latency = Percentiles(
        p50=latency_us,
        p90=latency_us,
        p95=latency_us,
        p99=latency_us * p99_factor,
        p99_9=latency_us * p99_factor,
        max=latency_us * p99_factor,
        mean=latency_us,
        count=answered,
    )
    rate = requests_per_s if answered else 0.0
    return Point(
        target=Target(target, f"grpc://{target}:8500", device, server="tfserving"),
        model=model,
        signature=signature,
        payload=payload,
        batch_size=batch,
        load=load,
        duration_s=10.0,
        counts=Counts.of(answered + errors, answered, answered * batch, {"UNAVAILABLE": errors} if errors else {}),
        throughput=Throughput(rate, rate * batch),
        latency=Latency(latency, histogram=encode(histogram_of([latency_us]))),
        stability=Stability(stable, 0.1, items_spread=0.0 if stable else 0.3),
        client=ClientView(),
        codec=Codec(),
        cut_off=cut_off,
        repeat=repeat,
        key=point_key(target, model, signature, payload, batch, load, repeat),
        notes=("server metrics unavailable: synthetic",),
    )
