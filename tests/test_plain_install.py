"""serve-bench without TensorFlow (issue 31).

DESIGN.md: TensorFlow is an extra; the plain install (clients, load, sweep, report, predict,
Locust) has none, and TF Serving's message descriptors ship inside the package. Two kinds of
test: cheap ones, in a process where ``import tensorflow`` fails as it does where TensorFlow is
not installed, that walk each command's path as far as it goes without a server; and the real
one (marked ``install``, about a minute): ``pip install`` of the project, no extras, into a fresh
virtualenv, which then measures a local server started from the project's own environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent
TENSORFLOW_EXTRA = "pip install 'serve-bench[tensorflow]'"

# Run first in each checked process: `import tensorflow` (or TF Serving's API) fails as it does where
# neither is installed, and every attempt is written down with who made it.
_NO_TENSORFLOW = textwrap.dedent(
    """
    import sys, traceback

    TRIED = []

    class NoTensorFlow:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in ("tensorflow", "tensorflow_serving"):
                stack = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<frozen")]
                TRIED.append(f"{name}, from " + " <- ".join(f"{f.filename}:{f.lineno}" for f in stack[::-1][:5]))
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTensorFlow())
    """
)

# Each command as far as it goes with no server and no TensorFlow: (name, argv, exit status, its last
# stderr line contains). $TMP is a scratch directory, $PORT a port nothing listens on.
_COMMANDS = [
    ("bench grpc", ["bench", "grpc://127.0.0.1:$PORT", "--model", "tiny", "--run-dir", "$TMP/b1"], 2, "cannot reach"),
    ("bench rest", ["bench", "http://127.0.0.1:$PORT", "--model", "tiny", "--run-dir", "$TMP/b2"], 2, "cannot reach"),
    (
        "bench jpeg",
        ["bench", "grpc://127.0.0.1:$PORT", "--model", "tiny", "--payload", "jpeg", "--run-dir", "$TMP/b3"],
        2,
        "cannot reach",
    ),
    ("sweep", ["sweep", "$TMP/spec.toml", "--run-dir", "$TMP/s", "--no-progress"], 2, "cannot reach"),
    ("import-locust", ["import-locust", "$TMP/locust", "--run-dir", "$TMP/l", "--model", "tiny"], 0, ""),
    ("report", ["report", "$TMP/demo", "--no-plots"], 0, ""),
    ("report locust", ["report", "$TMP/l", "--no-plots"], 0, ""),
    ("compare", ["compare", "$TMP/demo", "$TMP/demo"], 0, ""),
    (
        "predict",
        ["predict", "inception_v3", "--device", "a100", "--run-dir", "$TMP/demo", "--models-dir", "$TMP/none"],
        2,
        "no exported model 'inception_v3'",
    ),
    (
        "export",
        ["export", "tiny", "--models-dir", "$TMP/models"],
        2,
        f"export needs TensorFlow, which is not installed: {TENSORFLOW_EXTRA}",
    ),
]

_RUN_COMMANDS = """
import contextlib, io, json
from serve_bench.cli import build_parser, main

build_parser()
results = {}
for name, argv, *_ in COMMANDS:
    TRIED.clear()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code
    lines = err.getvalue().strip().splitlines()
    results[name] = [status, lines[-1] if lines else "", list(TRIED)]
print(json.dumps({"results": results, "loaded": "tensorflow" in sys.modules}))
"""

# The Locust scenarios load, and build every payload they send, with serve-bench's encoders.
_LOCUST = """
import json, types
sys.argv = ["locust"]
import loadtests.locustfile, loadtests.step_shape
from loadtests import _payloads

built = []
for payload, model in (("float", "tiny"), ("jpeg", "tiny"), ("float", "inception_v3")):
    options = types.SimpleNamespace(model=model, signature="", batch_size=2, payload=payload)
    built.append(len(_payloads.build_grpc_request(options)[0]))
    built.append(len(_payloads.build_rest_body(options)[0]))
    if payload == "float":
        built.append(len(_payloads.build_v2_grpc_request(options)[0]))
        built.append(len(_payloads.build_v2_rest_body(options)[0]))
print(json.dumps({"tried": TRIED, "built": built, "loaded": "tensorflow" in sys.modules}))
"""


def _without_tensorflow(code: str, python: str = sys.executable, **env: str) -> dict:
    run = subprocess.run(
        [python, "-c", _NO_TENSORFLOW + code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def _scratch(tmp_path: Path) -> tuple[Path, int]:
    """A measured run (the demo's), a Locust CSV, and a sweep spec whose one target nothing serves."""
    shutil.copytree(ROOT / "tests" / "data" / "demo_2core_20261125" / "inception_v3", tmp_path / "demo")
    (tmp_path / "locust_stats.csv").write_text(
        "Type,Name,Request Count,Failure Count,Requests/s,Average Response Time,Max Response Time,"
        "50%,90%,95%,99%,99.9%,100%\n"
        "grpc,predict tiny b1,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
        ",Aggregated,200,0,40.0,24.1,60,23,30,33,41,60,60\n"
    )
    port = free_port()
    (tmp_path / "spec.toml").write_text(
        textwrap.dedent(
            f"""
            name = "plain"
            model = "tiny"
            batch_sizes = [1]
            payloads = ["float"]
            [load]
            concurrency = [1]
            [durations]
            warmup_s = 0.1
            min_duration_s = 0.2
            min_requests = 1
            [[targets]]
            name = "nobody"
            url = "grpc://127.0.0.1:{port}"
            device = "cpu"
            """
        )
    )
    return tmp_path, port


def test_no_command_path_imports_tensorflow(tmp_path):
    """bench (gRPC, REST, JPEG), sweep, import-locust, report, compare and predict run as far as they go
    without a server, in a process where TensorFlow cannot be imported, and none of them tries; export,
    which needs it, says so in one line naming the extra."""
    scratch, port = _scratch(tmp_path)
    commands = [
        (name, [a.replace("$TMP", str(scratch)).replace("$PORT", str(port)) for a in argv], status, said)
        for name, argv, status, said in _COMMANDS
    ]
    seen = _without_tensorflow(f"COMMANDS = {commands!r}\n" + _RUN_COMMANDS)
    tried = {name: tries for name, (_, _, tries) in seen["results"].items() if tries}
    assert list(tried) == ["export"], "\n".join(t for name, tries in tried.items() if name != "export" for t in tries)
    assert not seen["loaded"]
    for name, _, status, said in commands:
        got_status, last_line, _ = seen["results"][name]
        assert got_status == status, f"{name}: exit {got_status}, {last_line}"
        assert said in last_line, f"{name}: {last_line}"


def test_locust_scenarios_do_not_import_tensorflow():
    seen = _without_tensorflow(_LOCUST)
    assert seen["tried"] == [], "\n".join(seen["tried"])
    assert not seen["loaded"]
    assert len(seen["built"]) == 10 and all(size > 0 for size in seen["built"])


def test_import_tensorflow_names_the_extra_and_stays_an_import_error():
    """A UserError (the CLI prints one line, exit 2), and still an ImportError for callers that ask."""
    seen = _without_tensorflow(
        """
import json
from serve_bench._tf import import_tensorflow
from serve_bench.errors import UserError
try:
    import_tensorflow()
except ImportError as exc:
    print(json.dumps({"tried": TRIED, "user_error": isinstance(exc, UserError), "message": str(exc)}))
"""
    )
    assert seen["user_error"]
    assert seen["message"] == f"this command needs TensorFlow, which is not installed: {TENSORFLOW_EXTRA}"


# --- the real plain install ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`pip install -c constraints.txt <the project>`, no extras, not editable, into a fresh virtualenv (through
    tools/pip_install.sh, as the Makefile installs: tried again when the network drops a download).

    pip builds from a copy of what the package is made of, so that the build (build/, *.egg-info) never
    writes into the working tree others edit. pip's own cache is used: a warm one makes this ~30 s.
    """
    root = tmp_path_factory.mktemp("plain")
    source = root / "source"
    shutil.copytree(ROOT / "serve_bench", source / "serve_bench", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        ["bash", ROOT / "tools" / "pip_install.sh", venv / "bin" / "python", "-c", ROOT / "constraints.txt", source],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return venv


def _run(venv: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout, cwd=venv, env=env
    )


@pytest.mark.install
def test_plain_install_has_no_tensorflow(plain_venv):
    found = _run(plain_venv, "python", "-c", "import tensorflow")
    assert found.returncode == 1 and "No module named 'tensorflow'" in found.stderr
    listed = _run(plain_venv, "python", "-m", "pip", "list", "--format", "json")
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "serve-bench" in names
    assert not names & {"tensorflow", "tensorflow-serving-api", "keras", "jax", "jaxlib", "tf-keras"}
    where = _run(plain_venv, "python", "-c", "import serve_bench; print(serve_bench.__file__)")
    assert str(plain_venv) in where.stdout  # the installed copy, not this checkout


@pytest.mark.install
def test_plain_install_runs_the_cli_and_says_what_export_needs(plain_venv):
    helped = _run(plain_venv, "serve-bench", "--help")
    assert helped.returncode == 0 and "bench" in helped.stdout
    exported = _run(plain_venv, "serve-bench", "export", "tiny", "--models-dir", str(plain_venv / "models"))
    assert exported.returncode == 2
    assert exported.stderr.strip().splitlines() == [
        f"serve-bench export: error: export needs TensorFlow, which is not installed: {TENSORFLOW_EXTRA}"
    ]


@pytest.mark.install
def test_plain_install_measures_a_local_server(plain_venv, jax_models, tmp_path):
    """`serve-bench bench` from the plain install, over gRPC (TF Serving's messages from the shipped
    descriptors) and REST, against the local server run from the project's environment on the jax runtime
    (the GPU host's: no TensorFlow on either side of the measurement)."""
    from serve_bench.servers import LocalServerProcess

    with LocalServerProcess(jax_models, "tiny", extra_flags=("--runtime=jax",)) as server:
        for url in (server.grpc_url, server.http_url):
            run_dir = tmp_path / url.partition(":")[0]
            measured = _run(
                plain_venv,
                "serve-bench",
                "bench",
                url,
                "--model",
                "tiny",
                "--warmup",
                "0.2",
                "--duration",
                "1",
                "--min-requests",
                "20",
                "--no-until-stable",
                "--run-dir",
                str(run_dir),
            )
            assert measured.returncode == 0, measured.stdout[-2000:] + measured.stderr[-2000:]
            (point,) = [json.loads(line) for line in (run_dir / "points.jsonl").read_text().splitlines()]
            assert point["counts"]["ok"] >= 20 and point["counts"]["errors"] == []
            assert point["target"]["url"] == url and point["target"]["runtime"] == "jax"
