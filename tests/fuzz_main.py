"""``make fuzz``: atheris, coverage-guided, over the fuzz targets of tests/_fuzz.py (issue 34, item 3).

Atheris is libFuzzer for Python, as OSS-Fuzz runs Python projects: serve_bench's modules are instrumented
for coverage, and libFuzzer mutates a corpus (seeded from the shipped specs, a points file, TF Serving's
config files and request bodies) towards inputs that reach new code. Each target gets an equal share of
``--seconds`` in a process of its own; a crash is written down (input and traceback, once per place and
exception type, in results/fuzz/<target>/crashes/) and the hunt goes on, so one known crash does not hide
the others.

    .venv/bin/python -m tests.fuzz_main --seconds 600            # every target (make fuzz)
    .venv/bin/python -m tests.fuzz_main --target json_tensor --seconds 60
    .venv/bin/python -m tests.fuzz_main --run json_tensor CORPUS...   # one target, libFuzzer's own flags

A crash is a regression test before it is a fix (tests/test_fuzz_*.py). The last run's figures:
benchmarks/README.md, "Fuzzing".
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "fuzz"

TARGET_NAMES = (
    "json_tensor",
    "tensor_proto",
    "v2_response",
    "sweep_spec",
    "tune_spec",
    "points",
    "batching_parameters",
    "models_config",
    "monitoring_config",
)


def _seeds(target: str) -> list[bytes]:
    """Valid inputs to start from: the fuzzer mutates them towards what the parser refuses."""
    loadtests = ROOT / "loadtests"
    if target == "json_tensor":
        return [
            b'{"instances": [[[[1,2,3],[4,5,6]],[[1,2,3],[4,5,6]]]]}',
            b'{"signature_name": "pair", "inputs": {"a": [[1, 2]], "b": ["x"]}}',
            b'{"signature_name": "serving_bytes", "instances": [{"b64": "eQ=="}]}',
            b'{"signature_name": "any", "inputs": [[1.5, NaN], [2, -Infinity]]}',
            b'{"signature_name": "half", "inputs": [1.5, 2]}',
            b'{"signature_name": "bools", "instances": [{"t": true, "u": 3}]}',
        ]
    if target == "tensor_proto":
        import numpy as np

        from serve_bench import _protos
        from serve_bench.codec import to_tensor_proto

        request = _protos.message("tensorflow.serving.PredictRequest")()
        request.model_spec.name = "m"
        to_tensor_proto(np.ones((2, 3), np.float32), request.inputs["x"])
        to_tensor_proto(np.ones((2, 3), np.float32), request.inputs["y"], typed_fields=True)
        strings = request.inputs["s"]
        strings.dtype = 7
        strings.tensor_shape.dim.add(size=2)
        strings.string_val.append(b"ab")
        return [bytes(request.SerializeToString())]
    if target == "v2_response":
        binary = b'{"outputs":[{"name":"y","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":5}}]}'
        return [
            b'\xff\xff{"outputs":[{"name":"y","datatype":"FP32","shape":[2],"data":[1,2]}]}',
            len(binary).to_bytes(2, "little") + binary + b"\x01\x00\x00\x00a",
        ]
    if target == "sweep_spec":
        return [p.read_bytes() for p in sorted((loadtests / "sweeps").glob("*.toml"))]
    if target == "tune_spec":
        return [p.read_bytes() for p in sorted((loadtests / "tune").glob("*.toml"))]
    if target == "points":
        from serve_bench.stats._schema import point_to_data
        from tests._points import make_point

        lines = [json.dumps(point_to_data(make_point("cpu", "cpu", b, 5000.0 * b))) for b in (1, 2)]
        return ["\n".join(lines).encode() + b"\n"]
    if target == "batching_parameters":
        return [p.read_bytes() for p in sorted((ROOT / "docker" / "batching").glob("*.txt"))] or [
            b"max_batch_size { value: 32 }\nbatch_timeout_micros { value: 1000 }\nallowed_batch_sizes: 32\n"
        ]
    if target == "models_config":
        return [(ROOT / "exported_models" / "models.config").read_bytes()]
    if target == "monitoring_config":
        return [p.read_bytes() for p in sorted((ROOT / "docker").glob("monitoring*"))] or [
            b'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }'
        ]
    raise KeyError(target)


def _run(target: str, libfuzzer_args: list[str]) -> None:
    """In this process: instrument serve_bench, then let libFuzzer drive the target."""
    import atheris

    with atheris.instrument_imports(include=["serve_bench"]):
        # the targets import these lazily: imported here, inside the block, they are instrumented
        import serve_bench.client._v2_codec
        import serve_bench.codec
        import serve_bench.export._batching
        import serve_bench.server._config
        import serve_bench.server._json_runs
        import serve_bench.server._json_tensor
        import serve_bench.stats._results
        import serve_bench.stats._schema
        import serve_bench.sweep._spec
        import serve_bench.tune._spec  # noqa: F401
    from tests._fuzz import TARGETS

    atheris.Setup([sys.argv[0], *libfuzzer_args], _kept_going(TARGETS[target], _crash_dir(libfuzzer_args)))
    atheris.Fuzz()


def _crash_dir(libfuzzer_args: list[str]) -> Path:
    for arg in libfuzzer_args:
        if arg.startswith("-artifact_prefix="):
            return Path(arg.split("=", 1)[1])
    return OUT / "crashes"


def _kept_going(target: Callable[[bytes], None], crashes: Path) -> Callable[[bytes], None]:
    """The target, with each crash written down (its input and traceback, once per distinct place and
    exception type) instead of ending the run: one known crash must not stop the hunt for the others."""
    seen: set[str] = set()

    def run(data: bytes) -> None:
        try:
            target(data)
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
            signature = f"{type(exc).__name__}@{where}"
            if signature in seen:
                return
            seen.add(signature)
            name = re.sub(r"[^\w.@-]", "_", signature)
            (crashes / f"crash-{name}").write_bytes(data)
            (crashes / f"crash-{name}.txt").write_text("".join(traceback.format_exception(exc)))
            print(f"CRASH {signature}: {str(exc)[:120]!r}", file=sys.stderr, flush=True)

    return run


_DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)")
_STATUS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)")


def _one(target: str, seconds: int) -> dict[str, object]:
    """Fuzz one target for ``seconds`` in a child process; what it covered and the crashes it kept."""
    work = OUT / target
    corpus, seeds, crashes = work / "corpus", work / "seeds", work / "crashes"
    for directory in (corpus, seeds, crashes):
        directory.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(_seeds(target)):
        (seeds / f"seed-{i}").write_bytes(seed)
    command = [
        sys.executable,
        "-m",
        "tests.fuzz_main",
        "--run",
        target,
        str(corpus),
        str(seeds),
        f"-max_total_time={seconds}",
        "-timeout=20",
        "-rss_limit_mb=4096",
        # short inputs, thousands a second: bodies past 64 KiB (the run path) ran 9 a second instrumented;
        # tests/test_fuzz_json_tensor.py fuzzes those with hypothesis
        "-max_len=8192",
        f"-artifact_prefix={crashes}/",
    ]
    started = time.monotonic()
    log = work / "fuzz.log"
    with open(log, "w") as out:
        subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=seconds + 300)
    text = log.read_text(errors="replace")
    found = _DONE.findall(text) or _STATUS.findall(text)
    runs, cov, ft, corp = (int(x) for x in found[-1]) if found else (0, 0, 0, 0)
    kinds = sorted(set(re.findall(r"^CRASH (.*)$", text, re.M)))
    return {
        "target": target,
        "seconds": round(time.monotonic() - started),
        "executions": runs,
        "coverage": cov,
        "features": ft,
        "corpus": corp,
        "crash_inputs": len([p for p in crashes.iterdir() if p.suffix != ".txt"]),
        "crashes": kinds,
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--run":
        _run(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=int, default=600, help="in all, shared equally by the targets")
    parser.add_argument("--target", choices=TARGET_NAMES, action="append", help="only these (default: all)")
    args = parser.parse_args()
    targets = args.target or list(TARGET_NAMES)
    share = max(10, args.seconds // len(targets))
    results = []
    for target in targets:
        result = _one(target, share)
        results.append(result)
        print(
            f"{target:<20} {result['seconds']:>4} s {result['executions']:>9} runs  cov {result['coverage']:>5}  "
            f"ft {result['features']:>6}  corpus {result['corpus']:>5}  crash inputs {result['crash_inputs']}",
            flush=True,
        )
        for crash in result["crashes"]:  # type: ignore[attr-defined]
            print(f"{'':<22}{crash}", flush=True)
    (OUT / "summary.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"summary: {OUT / 'summary.json'}")


if __name__ == "__main__":
    main()
