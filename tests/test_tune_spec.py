"""Tune: the spec, TF Serving's rules for batching parameters, the batching file, the restart commands,
the search strategies and the answer, without starting a server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format

from serve_bench import _protos
from serve_bench.errors import UserError
from serve_bench.stats import Estimate, Interval, Score, Slo, Throughput
from serve_bench.tune import (
    CommandRestarter,
    ComposeRestarter,
    StartFailed,
    TuneConfig,
    answer,
    bayesian_search,
    coordinate_search,
    grid_search,
    parse_tune_spec,
)
from serve_bench.tune._cli import restart_commands
from serve_bench.tune._spec import ServerSpec, TuneSpec
from tests._points import make_point

ROOT = Path(__file__).resolve().parent.parent

BASE = """
model = "tiny"
[space]
max_batch_size = [4, 8]
[load]
concurrency = [4]
"""


def spec_with(space: str = "max_batch_size = [4, 8]", extra: str = "") -> str:
    return f'model = "tiny"\n{extra}\n[space]\n{space}\n[load]\nconcurrency = [4]\n'


def parse_batching(text: str):  # type: ignore[no-untyped-def]
    return text_format.Parse(text, _protos.message("tensorflow.serving.BatchingParameters")())


# --- the spec ---------------------------------------------------------------------------------


def test_grid_is_the_product_and_batching_off_collapses() -> None:
    spec = parse_tune_spec(
        spec_with("batching = [false, true]\nmax_batch_size = [4, 8]\nbatch_timeout_micros = [0, 500]")
    )
    ids = [c.id for c in spec.configs]
    # batching off ignores the other knobs: 4 combinations collapse into one configuration
    assert ids == ["nobatch", "mbs4-to0", "mbs4-to500", "mbs8-to0", "mbs8-to500"]


def test_a_space_past_its_most_configurations_is_refused_before_any_is_built() -> None:
    """MAX_CONFIGS combinations are taken; one more is refused in one line naming the count and each knob's
    values, before expand_space builds them (three knobs of 200 values, 8 million, took minutes and gigabytes)."""
    from serve_bench.tune._spec import MAX_CONFIGS

    def values(n: int) -> str:
        return "[" + ", ".join(str(v) for v in range(1, n + 1)) + "]"

    side = 100  # MAX_CONFIGS = 100 x 100
    assert side * side == MAX_CONFIGS
    spec = parse_tune_spec(spec_with(f"max_batch_size = {values(side)}\nmax_enqueued_batches = {values(side)}"))
    assert len(spec.configs) == MAX_CONFIGS
    over = f"max_batch_size = {values(side)}\nmax_enqueued_batches = {values(side)}\nnum_batch_threads = [1, 2]"
    with pytest.raises(UserError, match=f"has {2 * MAX_CONFIGS:,} combinations \\(100 x 100 x 2\\)") as info:
        parse_tune_spec(spec_with(over), "t.toml")
    assert "\n" not in str(info.value)


def test_every_knob_parses_and_is_written() -> None:
    spec = parse_tune_spec(
        spec_with(
            "max_batch_size = [8]\nbatch_timeout_micros = [100]\nnum_batch_threads = [2]\nmax_enqueued_batches = [5]\n"
            "allowed_batch_sizes = [[2, 8]]\nenable_large_batch_splitting = [true]\nmax_execution_batch_size = [4]\n"
            "tensorflow_intra_op_parallelism = [1]\ntensorflow_inter_op_parallelism = [2]"
        )
    )
    (config,) = spec.configs
    proto = parse_batching(config.to_text())
    assert (
        proto.max_batch_size.value,
        proto.batch_timeout_micros.value,
        proto.num_batch_threads.value,
        proto.max_enqueued_batches.value,
        list(proto.allowed_batch_sizes),
        proto.enable_large_batch_splitting.value,
        proto.max_execution_batch_size.value,
    ) == (8, 100, 2, 5, [2, 8], True, 4)
    assert config.server_flags("/b.txt") == (
        "--enable_batching=true",
        "--batching_parameters_file=/b.txt",
        "--tensorflow_intra_op_parallelism=1",
        "--tensorflow_inter_op_parallelism=2",
    )


def test_unset_knobs_are_not_written_so_tf_serving_defaults_apply() -> None:
    """GetQueueOptions copies a field only when has_<field>() (tensorflow_serving/servables/tensorflow/
    bundle_factory_util.h:104-130): the defaults configuration writes no field at all."""
    proto = parse_batching(TuneConfig().to_text())
    assert not any(
        proto.HasField(name)
        for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
    )
    assert TuneConfig().id == "defaults"


def test_powers_of_two_end_at_max_batch_size() -> None:
    spec = parse_tune_spec(spec_with('max_batch_size = [6, 8]\nallowed_batch_sizes = ["powers_of_two"]'))
    assert [c.allowed_batch_sizes for c in spec.configs] == [(1, 2, 4, 6), (1, 2, 4, 8)]


@pytest.mark.parametrize(
    "space, message",
    [
        # bundle_factory_util.cc:113-124: the last allowed size must equal max_batch_size
        (
            "max_batch_size = [8]\nallowed_batch_sizes = [[1, 2, 4]]",
            "must match max_batch_size; last entry was 4; expected 8",
        ),
        # without max_batch_size TF Serving checks against the queue's default limit, 1000
        ("allowed_batch_sizes = [[1, 2, 4]]", "must match max_batch_size; last entry was 4; expected 1000"),
        ("max_batch_size = [8]\nallowed_batch_sizes = [[4, 2, 8]]", "increasing"),
        ("batch_timeout_micros = [0, -1]", "batch_timeout_micros must be non-negative"),
        # session_bundle_config.proto: num_batch_threads "Must be >= 1"
        ("num_batch_threads = [0]", "num_batch_threads must be positive"),
        ("max_batch_size = [0]", r"\(max_batch_size\) must be positive"),
        (
            "max_batch_size = [4]\nenable_large_batch_splitting = [true]\nmax_execution_batch_size = [8]",
            "input_batch_size_limit must be greater than or equal to max_execution_batch_size",
        ),
        ("tensorflow_intra_op_parallelism = [-2]", "tensorflow_intra_op_parallelism must be 0"),
        # google.protobuf.Int64Value (batching_parameters.proto): past int64 the server's text parser refuses the
        # file as it starts ("Value out of range"), and every configuration "did not start"
        ("max_batch_size = [99999999999999999999]", "space.max_batch_size: 99999999999999999999 is past int64"),
        ("max_batch_size = [8]\nallowed_batch_sizes = [[1, 9223372036854775808]]", "is past int64"),
    ],
)
def test_values_tf_serving_refuses_are_errors_naming_the_knob(space: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_tune_spec(spec_with(space))


@pytest.mark.parametrize(
    "text, message",
    [
        ('model = "tiny"\n[space]\n[load]\nconcurrency = [1]\n', r"\[space\] is empty"),
        (spec_with("max_batch_size = []"), "must be a non-empty list"),
        (spec_with("max_batch_sise = [4]"), "unknown key 'max_batch_sise' in \\[space\\].*max_batch_size"),
        (spec_with(extra="colour = 1"), "unknown key 'colour' in the top level"),
        ('model = "tiny"\n[space]\nmax_batch_size = [4]\n', "needs rates"),
        (spec_with(extra='[server]\nkind = "kubernetes"'), "server.kind must be one of"),
        (spec_with(extra='[server]\nkind = "compose"\nurl = "grpc://localhost:8510"'), "server.service"),
        (spec_with(extra='[server]\nkind = "command"\nurl = "grpc://h:1"'), "server.restart"),
        (spec_with(extra='[server]\nkind = "command"\nrestart = "true"'), "server.url"),
        (
            spec_with(extra='[server]\nkind = "command"\nrestart = "true"\nurl = "grpc://:8500"'),
            "server.url: .* no host",
        ),
        (
            spec_with(extra='[server]\nkind = "compose"\nurl = "v2+grpc://h:8001"'),
            "server.url must be .* grpc:// or http://",
        ),
        (spec_with(extra="[slo]\nat_rate = 7"), "at_rate 7 must be one of load.rates"),
        (
            'model = "tiny"\n[durations]\nmin_duration_s = 2\n[space]\nmax_batch_size = [4]\n[load]\nrates = [0.1]\n',
            r"\[load\] must be more than 0.25 requests/s for a 2 s window: at 0.1 a window schedules no request",
        ),
        (spec_with(extra='[search]\nmethod = "annealing"'), "search.method"),
        (spec_with(extra='[search]\nbaselines = ["tf_defaults"]'), "'tf_defaults' is not one of"),
        (spec_with(extra='[search]\norder = ["num_batch_threads"]'), "not a knob of"),
        (spec_with("max_batch_size = [4, 4]"), "lists a value twice"),
        (spec_with(extra="[durations]\nmin_duration_s = inf"), "durations.min_duration_s must be a finite number > 0"),
        (spec_with(extra="[slo]\nmax_ms = 0"), "slo.max_ms must be a finite number > 0"),
        (spec_with(extra='[slo]\npercentile = "p42"'), "slo.percentile must be one of"),
        # nan compared false and failed every configuration "within nan s"; -1 was refused after the first restart
        (spec_with(extra="[server]\nstartup_timeout_s = nan"), "server.startup_timeout_s must be a number of seconds"),
        (spec_with(extra="[server]\nstartup_timeout_s = inf"), r"at most 86400 \(a day\), got inf"),
        (spec_with(extra="seed = -1"), "seed must be a whole number >= 0, got -1"),
        # measured for hours and said only as a note in each point, as bench's --metrics and a sweep's metrics
        (
            spec_with(extra='[server]\nmetrics = "notaurl"'),
            "^t.toml: server.metrics must be an http:// or https:// URL of a Prometheus metrics page, got 'notaurl'$",
        ),
        # MLServer's batch time: nan and -1 collapsed silently into "nobatch"; inf was refused by a check of tune's own
        *[
            (
                'model = "tiny"\n[server]\nkind = "mlserver"\n[space]\nmax_batch_size = [8]\n'
                f"max_batch_time = [{v}]\n[load]\nconcurrency = [4]\n",
                f"max_batch_time must be a finite number of seconds, 0 or more, got {v}",
            )
            for v in ("nan", "-1.0", "inf")
        ],
    ],
)
def test_bad_specs_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as info:
        parse_tune_spec(text, "t.toml")
    assert "\n" not in str(info.value)


def test_durations_take_the_sweep_specs_keys() -> None:
    """The tune spec's [durations] is documented as the sweep's: one parser serves both, so the open loop's
    safety_cap is accepted here too, and a bad value is named where it was written."""
    spec = parse_tune_spec(spec_with(extra="[durations]\nsafety_cap = 64\nwarmup_s = 0.5"))
    assert spec.settings.safety_cap == 64 and spec.settings.warmup_s == 0.5
    with pytest.raises(UserError, match=r"durations\.safety_cap"):
        parse_tune_spec(spec_with(extra="[durations]\nsafety_cap = 0"))


def test_shipped_specs_parse_and_say_what_they_search() -> None:
    from serve_bench.tune import load_tune_spec

    local = load_tune_spec(ROOT / "loadtests" / "tune" / "local-cpu.toml")
    assert local.server.kind == "local" and local.model in ("inception_v3", "mobilenet_v2")
    gpu = load_tune_spec(ROOT / "loadtests" / "tune" / "tfserving-gpu.toml")
    assert gpu.server.kind == "compose" and gpu.server.service == "tfserving-gpu"
    compose = (ROOT / "docker" / "compose.yaml").read_text()
    assert "tfserving-gpu:" in compose and "/config/batching.txt" in compose


# --- restarting ---------------------------------------------------------------------------------


def test_compose_restart_is_the_exact_docker_compose_command(tmp_path: Path) -> None:
    """No Docker engine runs here: the Compose path is checked up to the command and the override it writes."""
    spec = parse_tune_spec((ROOT / "loadtests" / "tune" / "tfserving-gpu.toml").read_text())
    config = spec.configs[0]
    batching = tmp_path / "configs" / config.id / "batching_parameters.txt"
    batching.parent.mkdir(parents=True)
    batching.write_text(config.to_text())
    restarter = ComposeRestarter(spec.server, spec.model, tmp_path)
    command = restarter.restart_command(config, batching)
    override_path = batching.parent / "compose.override.json"
    assert command == [
        "docker",
        "compose",
        "-f",
        "docker/compose.yaml",
        "-f",
        str(override_path),
        "--profile",
        "gpu",
        "up",
        "-d",
        "--force-recreate",
        "--no-deps",
        "tfserving-gpu",
    ]
    override = json.loads(override_path.read_text())["services"]["tfserving-gpu"]
    assert override["volumes"] == [f"{batching.resolve()}:/config/batching.txt:ro"]
    flags = override["command"]
    assert "--enable_batching=true" in flags and "--batching_parameters_file=/config/batching.txt" in flags
    assert "--model_config_file=/models/models.config" in flags and "--port=8500" in flags
    assert sum(f.startswith("--enable_batching") for f in flags) == 1
    assert restarter.restore_command()[-5:] == ["up", "-d", "--force-recreate", "--no-deps", "tfserving-gpu"]
    # batching off drops the batching file flag, as tensorflow_model_server refuses a file without batching
    # (tensorflow_serving/model_servers/server.cc:239-243)
    off = restarter.override(TuneConfig(batching=False), batching)["services"]["tfserving-gpu"]["command"]
    assert "--enable_batching=false" in off and not any("batching_parameters_file" in f for f in off)


def test_dry_run_lists_every_configuration_with_its_command(tmp_path: Path) -> None:
    spec = parse_tune_spec((ROOT / "loadtests" / "tune" / "tfserving-gpu.toml").read_text())
    lines = restart_commands(spec, tmp_path)
    assert len(lines) == len(spec.configs) + len(spec.baselines)
    assert all(shlex.split(cmd)[:2] == ["docker", "compose"] for _, cmd in lines)


def command_spec(restart: str, url: str = "grpc://127.0.0.1:9", timeout: float = 1.5) -> ServerSpec:
    return ServerSpec(kind="command", restart=restart, url=url, startup_timeout_s=timeout)


def test_command_template_gets_the_file_flags_and_config(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    restarter = CommandRestarter(
        command_spec(f"echo {{config}} {{batching_file}} {{flags}} > {seen}; exit 3"), "tiny", tmp_path
    )
    config = TuneConfig(max_batch_size=8)
    batching = tmp_path / "b.txt"
    batching.write_text(config.to_text())
    with pytest.raises(StartFailed, match="failed with exit status 3"):
        asyncio.run(restarter.start(config, batching, tmp_path / "log"))
    words = seen.read_text().split()
    assert words[:2] == ["mbs8", str(batching.resolve())]
    assert f"--batching_parameters_file={batching.resolve()}" in words


def test_a_failing_restart_command_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    restarter = CommandRestarter(command_spec("echo cannot schedule pod >&2; exit 1"), "tiny", tmp_path)
    with pytest.raises(StartFailed) as info:
        asyncio.run(restarter.start(TuneConfig(), tmp_path / "b.txt", tmp_path / "log"))
    assert "cannot schedule pod" in info.value.log_tail


def test_a_server_that_never_becomes_available_times_out(tmp_path: Path) -> None:
    from tests.conftest import free_port

    restarter = CommandRestarter(
        command_spec("true", url=f"grpc://127.0.0.1:{free_port()}", timeout=1.0), "tiny", tmp_path
    )
    with pytest.raises(StartFailed, match="did not become AVAILABLE within 1 s"):
        asyncio.run(restarter.start(TuneConfig(), tmp_path / "b.txt", tmp_path / "log"))
    assert "did not become AVAILABLE" in (tmp_path / "log").read_text()


def test_failed_configurations_are_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    """Every restart fails: each configuration is recorded with its log, none aborts the tune, exit 1."""
    from serve_bench.tune import run_tune_command

    spec_path = tmp_path / "t.toml"
    spec_path.write_text(
        spec_with(
            extra='[server]\nkind = "command"\nrestart = "echo no GPU left; exit 4"\n'
            'url = "grpc://127.0.0.1:9"\n[search]\nbaselines = []'
        )
    )
    args = dataclasses.make_dataclass("A", ["spec", "run_dir", "resume", "method", "dry_run", "input_data"])(
        str(spec_path), str(tmp_path / "run"), False, None, False, None
    )
    assert run_tune_command(args) == 1  # type: ignore[arg-type]
    lines = [json.loads(line) for line in (tmp_path / "run" / "configs.jsonl").read_text().splitlines()]
    assert [(e["config"], e["status"]) for e in lines] == [("mbs4", "failed"), ("mbs8", "failed")]
    assert all("no GPU left" in e["log_tail"] for e in lines)


# --- search ---------------------------------------------------------------------------------------


def surface(config: TuneConfig) -> Score:
    """A known objective: best at 2 threads, max_batch_size 16, timeout 1000."""
    value = (
        100
        - abs((config.num_batch_threads or 0) - 2) * 10
        - abs((config.max_batch_size or 0) - 16)
        - abs((config.batch_timeout_micros or 0) - 1000) / 100
    )
    return Score(config.id, True, items=Estimate(value), latency=Estimate(10))


def test_coordinate_search_finds_the_grid_best_with_fewer_configurations() -> None:
    spec = parse_tune_spec(
        spec_with(
            "max_batch_size = [4, 8, 16, 32]\nbatch_timeout_micros = [0, 1000, 5000]\nnum_batch_threads = [1, 2, 4]"
        )
    )
    calls: list[str] = []

    async def evaluate(config: TuneConfig) -> Score:
        calls.append(config.id)
        return surface(config)

    grid = asyncio.run(grid_search(spec.configs, evaluate))
    grid_calls, calls[:] = list(calls), []
    found = asyncio.run(coordinate_search(spec.space, evaluate, "throughput"))
    assert len(grid_calls) == 36
    best_grid = max(grid, key=lambda s: s.items_per_s)
    best_found = max(found, key=lambda s: s.items_per_s)
    assert best_found.config == best_grid.config == "mbs16-to1000-th2"
    assert len(set(calls)) == len(calls) <= 0.4 * 36  # never measures one configuration twice
    assert calls[:2] == ["mbs4-to0-th1", "mbs4-to0-th2"]  # threads first, as the batching guide says


RECORDED = json.loads((ROOT / "tests" / "data" / "tune_grid_tiny_2core.json").read_text())
TABLES = [table["scores"] for table in RECORDED["tables"]]
NOISE = 0.08  # sd of the log-normal noise a replay puts on every figure (see the test below)


def recorded_spec(method: str) -> TuneSpec:
    space = "\n".join(f"{knob} = {values}" for knob, values in RECORDED["space"].items())
    return parse_tune_spec(spec_with(space, extra=f'[search]\nmethod = "{method}"'))


def recorded_evaluate(calls: list[str], noise: float = 0.0, seed: int = 0, table: int = 0):  # type: ignore[no-untyped-def]
    """Scores from a grid measured on a 2-core VM (tests/data), each times log-normal noise when asked."""
    scores = TABLES[table]
    rng = np.random.default_rng(seed)
    factors = {config: float(np.exp(rng.normal(0.0, noise))) for config in scores}

    async def evaluate(config: TuneConfig) -> Score:
        calls.append(config.id)
        row = scores[config.id]
        return Score(
            config.id,
            row["feasible"],
            Estimate(row["items_per_s"] * factors[config.id]),
            latency=Estimate(row["p99_ms"]),
        )

    return evaluate


def replay(method: str, table: int, noise: float = 0.0, seed: int = 0) -> tuple[float, list[str]]:
    """One search over a recorded grid: its pick's recorded value over the recorded best, and its calls."""
    from serve_bench.tune import search_budget

    spec = recorded_spec(method)
    budget = search_budget(spec)
    calls: list[str] = []
    evaluate = recorded_evaluate(calls, noise, seed, table)
    if method == "bayesian":
        found = asyncio.run(bayesian_search(spec.space, evaluate, "throughput", budget))
    else:
        found = asyncio.run(coordinate_search(spec.space, evaluate, "throughput", budget=budget))
    assert len(calls) == len(set(calls)) == len(found) <= budget == int(0.4 * len(spec.configs))
    pick = max(found, key=lambda s: s.rank("throughput"))
    best = max(row["items_per_s"] for row in TABLES[table].values())
    return TABLES[table][pick.config]["items_per_s"] / best, calls


def test_bayesian_search_reaches_each_recorded_grid_best_in_40_percent_of_it() -> None:
    """Issue 12's bar, within 5% of the grid's best in at most 40% of its configurations, on three grids of
    24 configurations measured on the same 2-core VM at different times (tests/data). The knobs interact,
    and not the same way each time: one batch thread was best at max_batch_size 16 in the first grid, two
    in the others. The batching guide's one-knob-at-a-time order keeps two threads on the first grid (they
    won at max_batch_size 1) and never comes back to them."""
    for table in range(len(TABLES)):
        share, calls = replay("bayesian", table)
        assert share >= 0.95, (table, calls)
    share, calls = replay("coordinate", 0)
    assert share < 0.6, calls


def test_bayesian_search_holds_up_under_noise_better_than_the_recipe_and_than_luck() -> None:
    """Single measurements mislead. Each replay multiplies every figure by log-normal noise of sd 8% (the
    recorded points' 95% intervals are about +-8%, so about 4% sd, and the same configuration drifted
    more than that between runs), lets the search pick by the noisy figures, and judges the pick by the
    recorded one. Over 100 replays of each grid the Bayesian search lands within 5% of the best at least
    as often as the coordinate search and as a random search of the same 9 configurations on the same
    noisy figures; on the first grid (the interacting one), in at least 90% of them. Measured: 97, 66 and 51 of 100
    for the three grids; coordinate 0, 37, 6; random 73, 51, 31."""
    rng = np.random.default_rng(0)
    for table, scores in enumerate(TABLES):
        best = max(row["items_per_s"] for row in scores.values())
        hits = {"bayesian": 0, "coordinate": 0, "random": 0.0}
        for seed in range(1, 101):
            for method in ("bayesian", "coordinate"):
                hits[method] += replay(method, table, NOISE, seed)[0] >= 0.95
            noisy = {c: row["items_per_s"] * float(np.exp(rng.normal(0.0, NOISE))) for c, row in scores.items()}
            for _ in range(50):
                draw = list(rng.choice(list(scores), 9, replace=False))
                hits["random"] += scores[max(draw, key=lambda c: noisy[c])]["items_per_s"] >= 0.95 * best
        hits["random"] /= 50
        assert hits["bayesian"] >= max(hits["coordinate"], hits["random"]), (table, hits)
        if table == 0:
            assert hits["bayesian"] >= 90, hits


def test_bayesian_search_starts_at_the_recipe_and_spreads_its_first_configurations() -> None:
    spec = recorded_spec("bayesian")
    calls: list[str] = []
    asyncio.run(bayesian_search(spec.space, recorded_evaluate(calls), "throughput", 4))
    # the first value of every knob, then the farthest corner, then each time the configuration whose
    # nearest chosen neighbour is farthest (knob values placed at 0..1 by their position in the list)
    assert calls == ["mbs1-to0-th2", "mbs16-to5000-th1", "mbs16-to1000-th2", "mbs1-to1000-th1"]


def test_bayesian_search_is_a_function_of_the_scores_so_resume_replays_it() -> None:
    """``--resume`` answers finished configurations from disk and lets the search run again; the search
    must then ask for the same configurations in the same order."""
    first = replay("bayesian", 1, NOISE, 3)[1]
    again = replay("bayesian", 1, NOISE, 3)[1]
    assert again == first and len(first) == 9


def test_bayesian_search_steers_around_failed_and_infeasible_configurations() -> None:
    """A server that did not start, and configurations missing the SLO, rank below every one that meets
    it; the search still finds the best feasible configuration and never measures one twice."""
    spec = parse_tune_spec(
        spec_with("max_batch_size = [4, 8, 16, 32]\nbatch_timeout_micros = [0, 1000, 5000]\nnum_batch_threads = [1, 2]")
    )
    calls: list[str] = []

    async def evaluate(config: TuneConfig) -> Score:
        calls.append(config.id)
        if config.max_batch_size == 32 and config.num_batch_threads == 2:
            return Score(config.id, False, failed="out of memory")
        if config.max_batch_size == 32:
            return Score(config.id, False, items=Estimate(900.0), latency=Estimate(180.0))  # misses a 100 ms SLO
        return dataclasses.replace(surface(config), latency=Estimate(40.0))

    found = asyncio.run(bayesian_search(spec.space, evaluate, "throughput", 12))
    assert len(calls) == len(set(calls)) == 12
    pick = max(found, key=lambda s: s.rank("throughput"))
    grid_best = max((surface(c) for c in spec.configs if c.max_batch_size != 32), key=lambda s: s.items_per_s)
    assert pick.feasible and pick.items_per_s >= 0.95 * grid_best.items_per_s, calls


def test_before_anything_meets_the_slo_the_search_avoids_servers_that_do_not_start() -> None:
    """Nothing meets the SLO yet and large batches do not start (out of memory): after its initial design
    the search heads for lower latency among configurations that start, not into the failing region."""
    spec = parse_tune_spec(
        spec_with("max_batch_size = [1, 2, 4, 8, 16, 32, 64]\nbatch_timeout_micros = [0, 1000, 5000]")
    )
    calls: list[str] = []

    async def evaluate(config: TuneConfig) -> Score:
        calls.append(config.id)
        size = config.max_batch_size or 1
        if size >= 16:
            return Score(config.id, False, failed="out of memory")
        return Score(
            config.id, False, items=Estimate(100.0 * size), latency=Estimate(300.0 / size**0.5)
        )  # all miss 100 ms

    found = asyncio.run(bayesian_search(spec.space, evaluate, "throughput", 8))
    design = 3  # one more than the varied knobs
    chosen = found[design:]
    assert sum(bool(s.failed) for s in chosen) <= 1, calls
    assert min(s.latency_ms for s in found) == pytest.approx(300.0 / 8**0.5), calls  # it reached mbs 8


def test_the_modelled_objective_is_log_throughput_or_minus_log_latency() -> None:
    from serve_bench.tune._bayes import objective_of

    fast, slow = (
        Score("a", True, items=Estimate(200.0), latency=Estimate(80.0)),
        Score("b", True, items=Estimate(100.0), latency=Estimate(40.0)),
    )
    assert objective_of(fast, "throughput") - objective_of(slow, "throughput") == pytest.approx(math.log(2.0))  # type: ignore[operator]
    assert objective_of(slow, "latency") - objective_of(fast, "latency") == pytest.approx(math.log(2.0))  # type: ignore[operator]
    missing = Score("c", False, items=Estimate(300.0), latency=Estimate(150.0))
    assert objective_of(missing, "throughput") == pytest.approx(-math.log(150.0))  # heads for the SLO
    assert objective_of(Score("d", False, failed="did not start"), "throughput") is None


def test_budget_caps_the_search() -> None:
    spec = parse_tune_spec(spec_with("max_batch_size = [4, 8, 16, 32]\nnum_batch_threads = [1, 2, 4]"))

    async def evaluate(config: TuneConfig) -> Score:
        return surface(config)

    assert len(asyncio.run(coordinate_search(spec.space, evaluate, "throughput", budget=3))) == 3
    assert len(asyncio.run(grid_search(spec.configs, evaluate, budget=5))) == 5


# --- the answer --------------------------------------------------------------------------------------


def with_ci(point, half: float):  # type: ignore[no-untyped-def]
    t = point.throughput
    return dataclasses.replace(
        point,
        throughput=Throughput(t.requests_per_s, t.items_per_s, Interval(t.items_per_s - half, t.items_per_s + half)),
    )


def test_answer_best_pareto_knobs_and_gains() -> None:
    configs = {
        c.id: c
        for c in (TuneConfig(), TuneConfig(batching=False), TuneConfig(max_batch_size=8), TuneConfig(max_batch_size=16))
    }
    # (config, concurrency, latency µs, p99 factor): throughput = concurrency / latency
    rows = [
        ("defaults", 4, 20_000, 1.5),
        ("defaults", 8, 40_000, 1.5),
        ("nobatch", 4, 10_000, 1.2),
        ("nobatch", 8, 40_000, 3.0),
        ("mbs8", 4, 10_000, 1.2),
        ("mbs8", 8, 16_000, 1.5),
        ("mbs16", 4, 12_000, 1.2),
        ("mbs16", 8, 14_000, 5.0),
    ]
    points: dict[str, list] = {}
    for cid, conc, lat, factor in rows:
        points.setdefault(cid, []).append(with_ci(make_point(cid, "cpu", 1, lat, conc, p99_factor=factor), 10.0))
    slo = Slo("p99", 50.0)
    result = answer(points, configs, {}, slo, {"defaults": "defaults", "no_batching": "nobatch"}, ["max_batch_size"])
    # mbs16 at c8 is fastest (571/s) but its p99 is 70 ms: the best under 50 ms is mbs8 at c8 (500/s, 24 ms)
    assert result.best is not None and result.best.config == "mbs8"
    assert math.isclose(result.best.items_per_s, 500.0) and math.isclose(result.best.latency_ms, 24.0)
    every = [p for pts in points.values() for p in pts]
    feasible = [p for p in every if p.latency.due.ms("p99") <= 50]
    assert result.best.items_per_s == max(p.items_per_s for p in feasible)
    # the Pareto front: no point both faster and lower-latency than a member
    for member in result.pareto:
        assert not any(
            p.items_per_s > member.items_per_s and p.latency.due.ms("p99") < member.latency_ms for p in every
        )
    assert [(p.config, round(p.items_per_s)) for p in result.pareto] == [
        ("nobatch", 400),
        ("mbs8", 500),
        ("mbs16", 571),
    ]
    knob_rows = {(r.knob, r.value): r for r in result.knobs}
    assert knob_rows[("max_batch_size", "8")].vs_best_pct == 0.0
    assert knob_rows[("max_batch_size", "off")].best_config == "nobatch"
    assert knob_rows[("max_batch_size", "default")].best_config == "defaults"
    gains = {g.baseline: g for g in result.gains}
    assert math.isclose(gains["defaults"].ratio.value, 500 / 200)
    # log-scale half-widths of [490, 510] and [190, 210] add in quadrature
    factor = math.exp(math.hypot(math.log(510 / 490) / 2, math.log(210 / 190) / 2))
    assert math.isclose(gains["defaults"].ratio.low or 0, 2.5 / factor)
    assert math.isclose(gains["defaults"].ratio.high or 0, 2.5 * factor)
    assert math.isclose(gains["no_batching"].ratio.value, 500 / 400)
    # at the best's own load (concurrency 8) the baseline's latency: 60 ms vs 24 ms
    assert gains["defaults"].load == "concurrency 8"
    assert math.isclose(gains["defaults"].latency_ratio.value, 60 / 24)
    assert gains["defaults"].latency_ratio.low is None  # synthetic points carry no p99 interval: none invented


def test_when_a_baseline_wins_the_gain_says_how_far_behind_the_best_searched_configuration_is() -> None:
    """TF Serving's defaults can be the best (they were on 2 cores for MobileNetV2, benchmarks/README.md):
    "1.00x the defaults" says nothing, so the gain compares the best searched configuration with them."""
    configs = {c.id: c for c in (TuneConfig(), TuneConfig(batching=False), TuneConfig(max_batch_size=8))}
    points = {
        "defaults": [with_ci(make_point("defaults", "cpu", 1, 8_000, 8), 10.0)],  # 1000/s
        "nobatch": [with_ci(make_point("nobatch", "cpu", 1, 20_000, 8), 10.0)],  # 400/s
        "mbs8": [with_ci(make_point("mbs8", "cpu", 1, 10_000, 8), 10.0)],  # 800/s
    }
    result = answer(points, configs, {}, Slo("p99", 50.0), {"defaults": "defaults", "no_batching": "nobatch"}, [])
    assert result.best is not None and result.best.config == "defaults"
    gains = {g.baseline: g for g in result.gains}
    assert math.isclose(gains["defaults"].ratio.value, 800 / 1000)
    assert gains["defaults"].text.startswith(
        "defaults is the best configuration; the best searched one, mbs8, is 0.80×"
    )
    assert math.isclose(gains["no_batching"].ratio.value, 1000 / 400)  # the best (the defaults) vs no batching


def test_no_configuration_meets_the_slo_names_the_closest() -> None:
    configs = {"mbs8": TuneConfig(max_batch_size=8), "mbs16": TuneConfig(max_batch_size=16)}
    points = {"mbs8": [make_point("mbs8", "cpu", 1, 30_000, 4)], "mbs16": [make_point("mbs16", "cpu", 1, 20_000, 4)]}
    result = answer(points, configs, {"mbs32": "did not become AVAILABLE"}, Slo("p99", 5.0), {}, [])
    assert result.best is None and result.closest is not None and result.closest.config == "mbs16"
    assert result.headline().startswith("no configuration meets p99 <= 5 ms; closest: mbs16")
    assert result.scores[-1].failed == "did not become AVAILABLE"


def test_latency_objective_at_a_given_rate() -> None:
    from serve_bench.stats import LoadInfo

    def open_point(cid: str, rate: float, latency: float):  # type: ignore[no-untyped-def]
        p = make_point(cid, "cpu", 1, latency, 1)
        return dataclasses.replace(p, load=LoadInfo("open", rate=rate, arrival="poisson"))

    points = {
        "a": [open_point("a", 50, 9_000), open_point("a", 100, 8_000)],
        "b": [open_point("b", 50, 7_000), open_point("b", 100, 30_000)],
    }
    configs = {"a": TuneConfig(max_batch_size=4), "b": TuneConfig(max_batch_size=8)}
    result = answer(points, configs, {}, Slo("p99", 100.0), {}, [], at_rate=100.0)
    assert result.best is not None and result.best.config == "a" and result.mode == "latency"


def test_tune_package_does_not_import_the_server_or_tensorflow() -> None:
    code = (
        "import sys, serve_bench.tune; bad = [m for m in sys.modules if m == 'serve_bench.server' "
        "or m.startswith('serve_bench.server.') or m == 'tensorflow']; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "config",
    [
        TuneConfig(max_batch_size=8, allowed_batch_sizes=(2, 8), num_batch_threads=2, max_enqueued_batches=4),
        TuneConfig(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=4),
        TuneConfig(batch_timeout_micros=0),
        TuneConfig(max_batch_size=8, allowed_batch_sizes=(1, 2, 4)),
        TuneConfig(allowed_batch_sizes=(1, 2, 4)),
        TuneConfig(max_batch_size=8, allowed_batch_sizes=(4, 2, 8)),
        TuneConfig(batch_timeout_micros=-1),
        TuneConfig(num_batch_threads=0),
        TuneConfig(max_batch_size=0),
        TuneConfig(max_batch_size=4, enable_large_batch_splitting=True, max_execution_batch_size=8),
    ],
    ids=lambda c: c.id,
)
def test_tune_and_the_local_server_agree_on_what_tf_serving_accepts(config: TuneConfig) -> None:
    """Both follow bundle_factory_util.cc:113-124 and session_bundle_config.proto: a configuration tune refuses
    is one the local server's BatchingParams refuses, and one it writes is read back with the same values."""
    from serve_bench.export import BatchingParams

    try:
        config.validate()
        tune_ok = True
    except UserError:
        tune_ok = False
    try:
        params = BatchingParams.from_text(config.to_text(), "tune")
        server_ok = True
    except UserError:
        server_ok = False
    assert tune_ok == server_ok
    if server_ok:
        for name in ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches"):
            if getattr(config, name) is not None:
                assert getattr(params, name) == getattr(config, name)
        assert params.allowed_batch_sizes == config.allowed_batch_sizes


def test_search_budget_is_40_percent_of_the_grid_but_never_less_than_the_search_needs() -> None:
    from serve_bench.tune import search_budget

    space = "max_batch_size = [4, 8, 16, 32]\nbatch_timeout_micros = [0, 1000, 5000]\nnum_batch_threads = [1, 2]"
    coordinate = parse_tune_spec(spec_with(space, extra='[search]\nmethod = "coordinate"'))
    assert search_budget(coordinate) == 9  # 40% of 24; one pass is 1 + 3 + 2 + 1 = 7
    bayesian = parse_tune_spec(spec_with(space, extra='[search]\nmethod = "bayesian"'))
    assert search_budget(bayesian) == 9  # 40% of 24; the design (4) and one chosen point are less
    small = "max_batch_size = [4, 8]\nbatch_timeout_micros = [0, 1000]"
    assert search_budget(parse_tune_spec(spec_with(small, extra='[search]\nmethod = "coordinate"'))) == 3  # one pass
    assert search_budget(parse_tune_spec(spec_with(small, extra='[search]\nmethod = "bayesian"'))) == 4  # all of it
    capped = parse_tune_spec(spec_with("max_batch_size = [4, 8]", extra="[search]\nmax_configs = 1"))
    assert search_budget(capped) == 1


def test_a_zero_timeout_is_written_out_and_read_back_as_set() -> None:
    """TF Serving copies batch_timeout_micros when has_batch_timeout_micros() (bundle_factory_util.h:113-116),
    so a chosen 0 must be present in the file, and readable as such by a person."""
    text = TuneConfig(max_batch_size=8, batch_timeout_micros=0).to_text()
    assert "batch_timeout_micros { value: 0 }" in text
    proto = parse_batching(text)
    assert proto.HasField("batch_timeout_micros") and proto.batch_timeout_micros.value == 0


def test_price_and_telemetry_of_the_server() -> None:
    spec = parse_tune_spec(
        spec_with(
            extra='currency = "USD"\n[server]\nprice_per_hour = 2.5\ntelemetry = ["http://127.0.0.1:9100/metrics"]'
        )
    )
    assert (spec.server.price_per_hour, spec.currency, spec.server.telemetry) == (
        2.5,
        "USD",
        ("http://127.0.0.1:9100/metrics",),
    )
    with pytest.raises(UserError, match="needs the currency"):
        parse_tune_spec(spec_with(extra="[server]\nprice_per_hour = 2.5"))
    with pytest.raises(UserError, match="price_per_hour must be a finite number >= 0"):
        parse_tune_spec(spec_with(extra='currency = "USD"\n[server]\nprice_per_hour = -1'))


def test_dry_run_prints_runnable_commands_and_keeps_their_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from serve_bench.tune import run_tune_command

    args = argparse.Namespace(
        spec=str(ROOT / "loadtests" / "tune" / "tfserving-gpu.toml"),
        run_dir=str(tmp_path / "dry"),
        resume=False,
        method=None,
        dry_run=True,
        input_data=None,
    )
    assert run_tune_command(args) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if ": docker compose " in line]
    assert len(lines) == len(parse_tune_spec((ROOT / "loadtests/tune/tfserving-gpu.toml").read_text()).configs) + 2
    for line in lines:
        override = Path(shlex.split(line.split(": ", 1)[1])[5])
        assert override.exists() and (override.parent / "batching_parameters.txt").exists()
    assert not (tmp_path / "dry" / "points.jsonl").exists()  # nothing was measured
