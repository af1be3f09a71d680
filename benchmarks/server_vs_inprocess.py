"""Served throughput over in-process TensorFlow throughput, same batch, same machine, same run.

    .venv/bin/python -m benchmarks.server_vs_inprocess [--models tiny,inception_v3] [--seconds 6]

For each model: in-process items/s calling the SavedModel's serving_default in
a loop (the bare library), then the local server (another process) driven by
serve-bench's client at one request in flight, over gRPC and REST, batch 1 and
8. Then server batching: C concurrent batch-1 clients against the server with
--enable_batching (max_batch_size C), beside in-process batch C. Where the
time goes comes from the server's own metrics (request vs TensorFlow runtime).
Goal: served >= 0.9 of in-process for inception_v3 at batch >= 8 over gRPC.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from serve_bench.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def models_dir_with(models: list[str]) -> Path:
    """exported_models/ when it holds every model; else a temporary export (random weights)."""
    from serve_bench.export import export_model, list_versions, write_models_config

    base = ROOT / "exported_models"
    missing = [m for m in models if not list_versions(base / m)]
    if not missing:
        return base
    tmp = Path(tempfile.mkdtemp(prefix="bench-models-"))
    for model in models:
        if list_versions(base / model):
            os.symlink(base / model, tmp / model)
        else:
            export_model(model, weights="random", out=tmp, warmup_batch_sizes=(1,))
    write_models_config(tmp)
    return tmp


def in_process(model_dir: Path, batch: int, seconds: float) -> float:
    from serve_bench._tf import import_tensorflow

    tf = import_tensorflow()
    from serve_bench.export import list_versions

    loaded = tf.saved_model.load(str(model_dir / str(list_versions(model_dir)[-1])))
    fn = loaded.signatures["serving_default"]
    shape = fn.structured_input_signature[1]["images"].shape.as_list()[1:]
    images = tf.constant(np.random.default_rng(0).integers(0, 256, (batch, *shape)).astype(np.float32))
    fn(images=images)  # warm up
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        fn(images=images)["features"].numpy()
        count += 1
    return count * batch / (time.perf_counter() - started)


class Server:
    def __init__(self, models_dir: Path, batching_file: Path | None) -> None:
        self.grpc, self.rest = free_port(), free_port()
        command = [
            sys.executable,
            "-m",
            "serve_bench",
            "serve",
            "--model_config_file",
            str(models_dir / "models.config"),
            "--models_dir",
            str(models_dir),
            "--port",
            str(self.grpc),
            "--rest_api_port",
            str(self.rest),
            "--monitoring_config_file",
            str(ROOT / "docker/monitoring.config"),
        ]
        if batching_file:
            command += ["--enable_batching", "--batching_parameters_file", str(batching_file)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait(self, model: str) -> None:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.rest}/v1/models/{model}", timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


async def served(
    url: str, metrics_url: str, model: str, batch: int, concurrency: int, seconds: float
) -> tuple[float, Any]:
    from serve_bench.client import connect
    from serve_bench.load import PointSettings, analyze, make_inputs, run_closed_loop
    from serve_bench.metrics import breakdown, scrape

    settings = PointSettings(warmup_s=1.0, min_duration_s=seconds, min_requests=3, timeout_s=300)
    async with connect(url, model, timeout=300) as client:
        prepared = client.prepare(make_inputs("float", batch, client.signature_info))
        before, _ = await scrape(metrics_url, model)
        run = await run_closed_loop(client, prepared, concurrency, settings)
        after, _ = await scrape(metrics_url, model)
    figures = analyze(run, "closed", settings)
    entrypoint = "GRPC" if url.startswith("grpc") else "REST"
    return figures.throughput.items_per_s, breakdown(before, after, entrypoint) if before and after else None


def _where(server: Any) -> str:
    """The server's own split of its mean request time (a ServerView), or "" without metrics."""
    if server is None or not server.request_us_mean:
        return ""
    return (
        f"server: request {server.request_us_mean / 1000:.1f} ms = TF {(server.compute_us_mean or 0) / 1000:.1f}"
        f" + queue {(server.queue_us_mean or 0) / 1000:.1f} + parse/serialize "
        f"{(server.overhead_us_mean or 0) / 1000:.1f} ms"
    )


def response_encoding(target: str, model: str) -> str:
    """Which fields the server's Predict answer fills (TF Serving: float_val, via AsProtoField)."""
    import grpc

    from serve_bench import _protos
    from serve_bench.codec import to_tensor_proto

    request = _protos.message("tensorflow.serving.PredictRequest")()
    request.model_spec.name = model
    with grpc.insecure_channel(target) as channel:
        metadata = channel.unary_unary(
            "/tensorflow.serving.PredictionService/GetModelMetadata",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_protos.message("tensorflow.serving.GetModelMetadataResponse").FromString,
        )
        meta_request = _protos.message("tensorflow.serving.GetModelMetadataRequest")()
        meta_request.model_spec.name = model
        meta_request.metadata_field.append("signature_def")
        defs = _protos.message("tensorflow.serving.SignatureDefMap")()
        metadata(meta_request, timeout=60).metadata["signature_def"].Unpack(defs)
        dims = [max(d.size, 1) for d in defs.signature_def["serving_default"].inputs["images"].tensor_shape.dim]
        to_tensor_proto(np.zeros(dims, np.float32), request.inputs["images"])
        predict = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_protos.message("tensorflow.serving.PredictResponse").FromString,
        )
        out = next(iter(predict(request, timeout=300).outputs.values()))
    return "tensor_content" if out.tensor_content else f"float_val ({len(out.float_val)} values)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="tiny,inception_v3")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--concurrency", type=int, default=8, help="C for the server-batching comparison")
    args = parser.parse_args()
    models = args.models.split(",")
    models_dir = models_dir_with(models)
    print(f"server vs in-process: {os.cpu_count()} cores, {args.seconds:g} s per figure, models in {models_dir}")
    for model in models:
        bare = {b: in_process(models_dir / model, b, args.seconds) for b in (1, 8, args.concurrency)}
        server = Server(models_dir, None)
        try:
            server.wait(model)
            metrics = f"http://127.0.0.1:{server.rest}/monitoring/prometheus/metrics"
            print(f"  {model}: gRPC answers fill {response_encoding(f'127.0.0.1:{server.grpc}', model)}")
            for protocol, url in (
                ("gRPC", f"grpc://127.0.0.1:{server.grpc}"),
                ("REST", f"http://127.0.0.1:{server.rest}"),
            ):
                for batch in (1, 8):
                    items, where = asyncio.run(served(url, metrics, model, batch, 1, args.seconds))
                    print(
                        f"  {model} {protocol} batch {batch}: served {items:.1f} images/s, in-process "
                        f"{bare[batch]:.1f}: {items / bare[batch]:.2f} of in-process. {_where(where)}"
                    )
        finally:
            server.stop()
        c = args.concurrency
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(
                f"max_batch_size {{ value: {c} }}\nbatch_timeout_micros {{ value: 2000 }}\n"
                "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 100 }\n"
            )
        server = Server(models_dir, Path(f.name))
        try:
            server.wait(model)
            metrics = f"http://127.0.0.1:{server.rest}/monitoring/prometheus/metrics"
            items, where = asyncio.run(served(f"grpc://127.0.0.1:{server.grpc}", metrics, model, 1, c, args.seconds))
            print(
                f"  {model} server batching, {c} concurrent batch-1 gRPC clients: {items:.1f} images/s vs "
                f"in-process batch {c} {bare[c]:.1f}: {items / bare[c]:.2f}; mean processed batch "
                f"{(where.processed_batch_mean if where else 0) or 0:.1f}. {_where(where)}"
            )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
