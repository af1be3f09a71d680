"""The client against the real local server, over gRPC and REST."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import numpy as np
import pytest

from serve_bench.client import (
    ConnectError,
    InvalidArgument,
    NotFound,
    connect,
    connect_sync,
    predict_stream,
)
from serve_bench.client._pipeline import StreamStats
from serve_bench.stats import InvalidTarget
from tests._servers import local_server
from tests.conftest import free_port


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


@pytest.fixture(params=["grpc", "rest", "rest-rows"])
def target(request, server):
    if request.param == "grpc":
        return server.grpc_url, {}
    return server.rest_url, {"row_format": request.param == "rest-rows"}


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(n, 64, 64, 3)).astype(np.float32)


def test_import_does_not_import_tensorflow():
    code = "import sys, serve_bench.client; assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_predict_equals_in_process(target, reference):
    url, options = target
    async with connect(url, "tiny", **options) as client:
        images = _images(3)
        outputs = await client.predict({"images": images})
        assert outputs["features"].dtype == np.float32
        np.testing.assert_allclose(outputs["features"], reference(images), rtol=1e-5, atol=1e-6)
        status = await client.status()
        assert status.versions == {1: "AVAILABLE"}
        signatures = await client.metadata()
        assert signatures["serving_default"].inputs["images"].shape == (-1, 64, 64, 3)


async def test_serving_bytes_over_both_transports(server, reference):
    import io

    from PIL import Image

    images = _images(2, seed=8)
    pngs = []
    for image in images:
        buf = io.BytesIO()
        Image.fromarray(image.astype(np.uint8)).save(buf, format="PNG")
        pngs.append(buf.getvalue())
    for url in (server.grpc_url, server.rest_url):
        async with connect(url, "tiny", signature="serving_bytes") as client:
            outputs = await client.predict({"image_bytes": np.array(pngs, dtype=object)})
            np.testing.assert_allclose(outputs["features"], reference(images), rtol=1e-4, atol=1e-5)


async def test_order_preserved_under_concurrency(target, reference):
    url, options = target
    async with connect(url, "tiny", **options) as client:
        batches = [_images(1 + i % 3, seed=i) for i in range(24)]
        results = await asyncio.gather(*(client.predict({"images": b}) for b in batches))
        for batch, result in zip(batches, results):
            np.testing.assert_allclose(result["features"], reference(batch), rtol=1e-5, atol=1e-6)


async def test_prepared_requests_time_encode_and_decode_apart(target):
    url, options = target
    async with connect(url, "tiny", **options) as client:
        prepared = client.prepare({"images": _images(2)})
        assert prepared.items == 2 and prepared.nbytes > 2 * 64 * 64 * 3 and prepared.encode_seconds > 0
        first = await client.predict_prepared(prepared)
        second = await client.predict_prepared(prepared)  # a prepared request is reusable
        np.testing.assert_array_equal(first.outputs["features"], second.outputs["features"])
        assert first.send_seconds > 0 and first.decode_seconds > 0


async def test_stream_results_in_order_and_in_flight_bounded(target, reference):
    url, options = target
    async with connect(url, "tiny", **options) as client:
        frames = list(_images(37, seed=11))
        send = client.transport.send
        live, peak = 0, 0

        async def counting_send(request, timeout):
            nonlocal live, peak
            live += 1
            peak = max(peak, live)
            try:
                await asyncio.sleep(0.01)  # make overlap likely
                return await send(request, timeout)
            finally:
                live -= 1

        client.transport.send = counting_send
        stats = StreamStats()
        # max_delay_ms long enough that only a full batch or the end of the stream sends one: with 20 ms a
        # stall of this process (a GC pass over TensorFlow's heap) legitimately sent a partial batch while a
        # slot was free. Partial batches while back-pressured are covered in test_pipeline_unit.py.
        results = [
            r
            async for r in predict_stream(
                client, frames, batch_size=4, max_delay_ms=60_000, max_in_flight=3, stats=stats
            )
        ]
        assert [r.first_index for r in results] == list(range(0, 37, 4))
        features = np.concatenate([r.outputs["features"] for r in results])
        np.testing.assert_allclose(features, reference(np.stack(frames)), rtol=1e-5, atol=1e-6)
        assert 1 <= peak <= 3 and stats.peak_in_flight <= 3


def test_sync_wrapper(server, reference):
    with connect_sync(server.grpc_url, "tiny") as client:
        images = _images(2, seed=3)
        np.testing.assert_allclose(
            client.predict({"images": images})["features"], reference(images), rtol=1e-5, atol=1e-6
        )
        assert client.status().versions == {1: "AVAILABLE"}


@pytest.mark.slow
async def test_inception_batch_4_exceeds_default_grpc_limit(inception_dir):
    # 4 x 299 x 299 x 3 float32 = 4.3 MB > gRPC's default 4 MiB message limit
    with local_server(inception_dir, models=("inception_v3",), warmup=False) as running:
        async with connect(running.grpc_url, "inception_v3", timeout=120) as client:
            images = np.random.default_rng(0).integers(0, 256, (4, 299, 299, 3)).astype(np.float32)
            assert images.nbytes > 4 * 1024 * 1024
            outputs = await client.predict({"images": images})
            assert outputs["features"].shape == (4, 2048)


# --- bad input ------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["grpc", "http"])
async def test_unreachable_target_names_the_url_within_timeout(scheme):
    url = f"{scheme}://127.0.0.1:{free_port()}"
    started = time.perf_counter()
    with pytest.raises(ConnectError) as info:
        await connect(url, "tiny", timeout=3)
    assert time.perf_counter() - started < 5
    assert url in str(info.value)


@pytest.mark.parametrize("scheme", ["grpc", "http", "v2+grpc", "v2+http"])
async def test_a_host_that_does_not_resolve_cannot_be_reached(scheme):
    """A name no resolver knows (``.invalid`` is reserved to be one, RFC 2606) is refused at connect, as a refused
    port is: gRPC says "errors resolving ...: address lookup failed" (grpcio 1.85's resolver), which used to pass
    for a server's UNAVAILABLE and measured a whole point of failures."""
    url = f"{scheme}://nosuchhost.invalid:8500"
    with pytest.raises(ConnectError, match="cannot reach"):  # time for a resolver that answers slowly, not NXDOMAIN
        await connect(url, "tiny", timeout=30)


@pytest.mark.parametrize("scheme", ["http", "v2+http"])
async def test_a_rest_target_at_a_grpc_port_is_named_so_at_connect(scheme, grpc_port):
    """http:// given a gRPC port (a real gRPC server; its first bytes are HTTP/2's SETTINGS frame): one line that
    says the server does not answer HTTP/1.1 and names grpc://, not aiohttp's "400, Bad status line" and the
    frame's bytes."""
    with pytest.raises(ConnectError) as caught:
        await connect(f"{scheme}://127.0.0.1:{grpc_port}", "tiny", timeout=5)
    said = str(caught.value)
    assert "does not answer in HTTP/1.1" in said and "grpc://" in said and "\\x00" not in said, said


def test_unknown_scheme():
    with pytest.raises(InvalidTarget, match="unknown scheme"):
        connect("ftp://localhost:21", "tiny")


async def test_unknown_model(target):
    url, options = target
    with pytest.raises(NotFound):
        await connect(url, "no_such_model", **options)


@pytest.mark.parametrize(
    "inputs, words",
    [
        ({"pixels": np.zeros((1, 64, 64, 3), np.float32)}, "pixels"),
        ({"images": np.zeros((1, 64, 64, 3), np.float64)}, "float64"),
        ({"images": np.zeros((1, 32, 32, 3), np.float32)}, "shape"),
    ],
    ids=["name", "dtype", "shape"],
)
async def test_wrong_inputs_refused_before_sending(server, inputs, words):
    async with connect(server.grpc_url, "tiny") as client:
        sent = []
        original = client.transport.send
        client.transport.send = lambda *a: sent.append(a) or original(*a)
        with pytest.raises(InvalidArgument, match=words):
            await client.predict(inputs)
        assert sent == []


async def test_server_side_invalid_argument_without_metadata(server):
    # With metadata skipped, the server's INVALID_ARGUMENT maps into the same error.
    for url in (server.grpc_url, server.rest_url):
        async with connect(url, "tiny", fetch_metadata=False) as client:
            with pytest.raises(InvalidArgument):
                await client.predict({"images": np.zeros((1, 32, 32, 3), np.float32)})


async def test_the_open_inference_protocol_against_a_tf_serving_port_is_refused_at_connect(server):
    """``v2+grpc://`` at a TF Serving port: TF Serving's gRPC server registers ModelService and PredictionService
    only (tensorflow/serving 9d981c5, tensorflow_serving/model_servers/server.cc:390-391), as the local server
    does, so ServerMetadata and ModelMetadata answer UNIMPLEMENTED. Refused at connect in one line naming the
    scheme to use; it used to connect unchecked and fail every request of a point the same way."""
    url = server.grpc_url.replace("grpc://", "v2+grpc://", 1)
    with pytest.raises(ConnectError) as caught:
        await connect(url, "tiny")
    assert str(caught.value) == (
        f"{url}: the server there does not implement the Open Inference Protocol (ServerMetadata and "
        f"ModelMetadata: UNIMPLEMENTED); for TF Serving's API use {server.grpc_url}"
    )


async def test_grpc_against_a_rest_port_is_refused_at_connect_naming_http(server):
    """``grpc://`` at the REST port (an HTTP/1.1 server): gRPC's transport reads an HTTP/1.x status line where it
    expects HTTP/2's SETTINGS frame and fails the connection with "Trying to connect an http1.x server" (grpc/grpc,
    src/core/ext/transport/chttp2/transport/chttp2_transport.cc, try_http_parsing). It was "cannot reach" with
    gRPC's words; it is now one line saying what answered and naming http:// and v2+http://."""
    url = server.rest_url.replace("http://", "grpc://", 1)
    with pytest.raises(ConnectError) as caught:
        await connect(url, "tiny")
    assert str(caught.value) == (
        f"cannot talk to {url}: the server there answers in HTTP/1.x, not gRPC (an HTTP port? use http:// or "
        "v2+http:// for it; or an HTTP proxy in the way)"
    )


async def test_a_grpc_client_at_the_rest_port_is_one_warning_line_in_the_server_s_log(server):
    """The same mistake seen from the server: gRPC's HTTP/2 preface ("PRI * HTTP/2.0") reaches aiohttp, which
    refused it with BadHttpMessage ("Pause on PRI/Upgrade") and logged an error with a traceback through
    ``aiohttp.server`` (aiohttp 3.14.5, web_protocol.py handle_error, which logs other non-HTTP traffic at debug
    level as noise). The local server now logs one warning line saying what came and where a gRPC client belongs.
    Waits on the log record itself (a handler's event)."""
    import logging
    import threading

    said: list[logging.LogRecord] = []
    arrived = threading.Event()

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record)
            arrived.set()

    catch = Catch()
    logger = logging.getLogger("aiohttp.server")
    logger.addHandler(catch)
    try:
        with pytest.raises(ConnectError):
            await connect(server.rest_url.replace("http://", "grpc://", 1), "tiny")
        assert await asyncio.to_thread(arrived.wait, 60), "the server logged nothing"
    finally:
        logger.removeHandler(catch)
    record = said[0]
    assert (record.levelname, record.getMessage(), record.exc_info) == (
        "WARNING",
        "REST port: a client sent what is not HTTP/1.x (HTTP/2's preface, PRI * HTTP/2.0); a gRPC client wants the "
        "gRPC port",
        None,
    )


def test_the_rest_port_s_log_filter_leaves_an_http_1_client_s_bad_message_an_error() -> None:
    """Only HTTP/2's preface is rewritten: a header too long (LineTooLong, a BadHttpMessage too) comes from an
    HTTP/1.x client, and stays aiohttp's error with its traceback."""
    import logging

    from aiohttp.http_exceptions import LineTooLong

    from serve_bench.server._app import _NotHttp1

    try:
        raise LineTooLong(b"x" * 9000, "8190")
    except LineTooLong:
        record = logging.LogRecord("aiohttp.server", logging.ERROR, "", 0, "Error handling request", (), sys.exc_info())
    assert _NotHttp1().filter(record)
    assert (record.levelname, record.getMessage(), record.exc_info is not None) == (
        "ERROR",
        "Error handling request",
        True,
    )


async def test_the_open_inference_protocol_over_rest_against_a_tf_serving_port_is_refused_at_connect(server):
    """``v2+http://`` at a TF Serving REST port: TF Serving dispatches only paths matching ``(?i)/v1/.*``
    (tensorflow/serving 9d981c5, tensorflow_serving/model_servers/http_rest_api_util.h:33) and answers any other
    with libevent's 404 page (util/net_http/server/internal/evhttp_server.cc:176), as the local server does. Refused
    at connect in one line naming http://; it said "HTTP 404: <HTML><HEAD>"."""
    url = server.rest_url.replace("http://", "v2+http://", 1)
    with pytest.raises(ConnectError) as caught:
        await connect(url, "tiny")
    assert str(caught.value) == (
        f"{url}: the server there does not implement the Open Inference Protocol (GET /v2 and the model's "
        f"metadata: HTTP 404); for TF Serving's API use {server.rest_url}"
    )


async def test_failed_connect_releases_its_transport(server):
    from serve_bench.client._client import Client
    from serve_bench.client._rest import RestTransport

    transport = RestTransport(server.rest_url, "no_such_model", None)
    with pytest.raises(NotFound):
        await Client(transport, "no_such_model").open()
    assert transport._session.closed


async def test_a_grpc_target_on_an_ipv6_host_reaches_it():
    """``grpc://[::1]:PORT`` reaches a server listening on ::1: the channel gets the bracketed authority
    the target's parse gives (``host:port`` from an unbracketed ``::1`` is no address gRPC can resolve).
    The server is a bare grpc.aio server that answers every method NOT_FOUND with a word of its own, so
    the word coming back proves the request got there, for TF Serving's API and the Open Inference
    Protocol alike."""
    import socket

    import grpc
    from grpc import aio

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("this machine has no IPv6 loopback (::1) to listen on")

    class AnswerEverything(grpc.GenericRpcHandler):
        def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            async def answer(request: bytes, context: aio.ServicerContext) -> bytes:
                await context.abort(grpc.StatusCode.NOT_FOUND, "reached over ipv6")
                return b""

            return grpc.unary_unary_rpc_method_handler(answer)

    server = aio.server()
    server.add_generic_rpc_handlers((AnswerEverything(),))
    port = server.add_insecure_port("[::1]:0")
    await server.start()
    try:
        for scheme in ("grpc", "v2+grpc"):
            async with connect(f"{scheme}://[::1]:{port}", "tiny", fetch_metadata=False, timeout=10) as client:
                with pytest.raises(NotFound, match="reached over ipv6"):
                    await client.status()
    finally:
        await server.stop(None)


@pytest.mark.parametrize("caller_s, cap_s", [(None, 0.2), (0.2, 600.0)])
async def test_the_scheme_probe_on_the_way_to_an_error_waits_the_shorter_of_the_call_s_timeout_and_its_cap(
    monkeypatch: pytest.MonkeyPatch, caller_s: float | None, cap_s: float
) -> None:
    """Told 404 for a model's metadata, the REST client asks GET /v2 whether an Open Inference Protocol server is
    there before it reports the 404. That question is on the way to an error, so it waits the shorter of the call's
    own timeout and the probe's cap (``client/_base.probe_timeout``): a proxy that never answers GET /v2 must not
    hold the error for the call's whole timeout, nor for ever where the call has none. Here GET /v2 never answers
    (it waits on an event set only at teardown); the cap is made short where the call has no timeout, and long
    where the call's is short (a metadata call waits at least ``METADATA_TIMEOUT_S``, made as short here). Either
    way the 404 comes back; waiting the longer of the two is caught by the test's guard, which no correct run comes
    near."""
    from aiohttp import web

    import serve_bench.client._base as base
    import serve_bench.client._client as client

    monkeypatch.setattr(base, "_PROBE_TIMEOUT_S", cap_s)
    monkeypatch.setattr(client, "METADATA_TIMEOUT_S", 0.1)
    released = asyncio.Event()

    async def missing(request: web.Request) -> web.Response:
        return web.json_response({"error": "Servable not found for request: Latest(tiny)"}, status=404)

    async def stalls(request: web.Request) -> web.Response:
        await released.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/v1/models/tiny/metadata", missing)
    app.router.add_get("/v2", stalls)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        with pytest.raises(NotFound, match="HTTP 404"):
            await asyncio.wait_for(connect(f"http://127.0.0.1:{port}", "tiny", timeout=caller_s), 60)
    finally:
        released.set()
        await runner.cleanup()
