"""TF Serving's own example clients work against the local server.

Each test does what tensorflow_serving/example/resnet_client.py (REST) and
resnet_client_grpc.py (gRPC) do, step for step, with only the model name ("tiny"), the input
and output names ("images", "features") and the image source (a JPEG written here instead of
downloading the cat picture) changed.
"""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
from PIL import Image

from tests._servers import local_server


@pytest.fixture(scope="module")
def server(models_dir):
    with local_server(models_dir) as running:
        yield running


@pytest.fixture(scope="module")
def jpeg_path(tmp_path_factory):
    pixels = np.random.default_rng(5).integers(0, 256, size=(64, 64, 3)).astype(np.uint8)
    path = tmp_path_factory.mktemp("image") / "cat.jpg"
    Image.fromarray(pixels).save(path, format="JPEG")
    return path


def test_resnet_client_rest(server, jpeg_path, reference):
    """tensorflow_serving/example/resnet_client.py:39-83 with MODEL_ACCEPT_JPG = False."""
    import requests

    SERVER_URL = f"{server.rest_url}/v1/models/tiny:predict"
    content = jpeg_path.read_bytes()  # stands in for dl_request.content

    # -- the example, from here --
    jpeg_rgb = Image.open(io.BytesIO(content))
    jpeg_rgb = np.expand_dims(np.array(jpeg_rgb) / 255.0, 0).tolist()
    predict_request = json.dumps({"instances": jpeg_rgb})

    for _ in range(3):
        response = requests.post(SERVER_URL, data=predict_request)
        response.raise_for_status()

    total_time = 0.0
    num_requests = 10
    for _ in range(num_requests):
        response = requests.post(SERVER_URL, data=predict_request)
        response.raise_for_status()
        total_time += response.elapsed.total_seconds()
        prediction = response.json()["predictions"][0]
    # -- to here --

    want = reference(np.expand_dims(np.array(Image.open(jpeg_path)) / 255.0, 0).astype(np.float32))[0]
    np.testing.assert_allclose(np.asarray(prediction, np.float32), want, rtol=1e-5, atol=1e-6)
    assert np.argmax(prediction) == np.argmax(want) and total_time > 0


def test_resnet_client_grpc(server, jpeg_path, reference):
    """tensorflow_serving/example/resnet_client_grpc.py:42-74 with MODEL_ACCEPT_JPG = False: the
    answer is read from .float_val, which only a server filling the typed fields (as TF Serving's
    AsProtoField, predict_util.cc:177-182) answers."""
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    server_address = server.grpc_target  # FLAGS.server
    with open(jpeg_path, "rb") as f:  # FLAGS.image
        data = f.read()

    # -- the example, from here --
    data = Image.open(io.BytesIO(data))
    data = np.array(data) / 255.0
    data = np.expand_dims(data, 0)
    data = data.astype(np.float32)

    channel = grpc.insecure_channel(server_address)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.model_spec.signature_name = "serving_default"
    request.inputs["images"].CopyFrom(tf.make_tensor_proto(data))
    result = stub.Predict(request, 10.0)
    result = result.outputs["features"].float_val
    # -- to here --

    channel.close()
    want = reference(data)[0]
    assert len(result) == want.size
    np.testing.assert_allclose(np.asarray(result, np.float32), want, rtol=1e-5, atol=1e-6)
    assert np.argmax(result) == np.argmax(want)


def test_resnet_client_rest_jpeg_variant(server, jpeg_path, reference):
    """resnet_client.py:50-53 with MODEL_ACCEPT_JPG = True: '{"instances" : [{"b64": ...}]}'.
    The tiny model takes JPEG on its serving_bytes signature, so this one request also names
    it (the only change beyond names and image source)."""
    import requests

    jpeg_bytes = base64.b64encode(jpeg_path.read_bytes()).decode("utf-8")
    predict_request = '{"signature_name": "serving_bytes", "instances" : [{"b64": "%s"}]}' % jpeg_bytes  # noqa: UP031 (as the example writes it)
    response = requests.post(f"{server.rest_url}/v1/models/tiny:predict", data=predict_request)
    response.raise_for_status()
    prediction = response.json()["predictions"][0]
    assert len(prediction) == 32 and np.all(np.isfinite(prediction))
