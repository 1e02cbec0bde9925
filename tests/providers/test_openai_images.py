"""The OpenAI-compatible image provider against a real local HTTP server:
generations and edits (base64 PNGs), upstream 5xx, malformed answers and
timeouts."""

from __future__ import annotations

import pytest
from persona_service.kernel.models import ImagePrompt, ProviderError, ProviderTimeout
from persona_service.providers.local import LocalProvider
from persona_service.providers.openai_http import OpenAIHTTPProvider
from persona_service.providers.retrying import Retrying

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def images(openai_stub):
    with OpenAIHTTPProvider(openai_stub.base_url, api_key="sk-test", image_model="gpt-image-1",
                            image_size="1024x1024", image_timeout_seconds=0.5) as provider:
        yield provider


def test_generation_sends_the_prompt_and_returns_the_png(images, openai_stub):
    png = images.generate_image(ImagePrompt("p1", "Ada", ("curious",), "in a red scarf", "sketch"))
    assert png.startswith(PNG)
    (request,) = openai_stub.requests_to("/images/generations")
    assert request.body["model"] == "gpt-image-1" and request.body["size"] == "1024x1024"
    assert "Ada" in request.body["prompt"] and "red scarf" in request.body["prompt"]
    assert request.headers["authorization"] == "Bearer sk-test"


def test_edit_uploads_the_image_as_multipart(images, openai_stub):
    source = LocalProvider().generate_image(ImagePrompt("p1"))
    png = images.edit_image(source, "add glasses")
    assert png.startswith(PNG) and png != source
    (request,) = openai_stub.requests_to("/images/edits")
    assert request.headers["content-type"].startswith("multipart/form-data")
    assert request.body["prompt"] == "add glasses" and request.body["image"] == source


def test_upstream_5xx_is_a_provider_error_retried_then_raised(images, openai_stub):
    openai_stub.inject_error(times=4, status=500)
    retrying = Retrying(images, delays=(0, 0, 0))
    with pytest.raises(ProviderError) as raised:
        retrying.generate_image(ImagePrompt("p1"))
    assert raised.value.code == "provider_error" and raised.value.upstream_status == 500
    assert len(openai_stub.requests_to("/images/generations")) == 4


def test_a_retry_that_succeeds_returns_the_image(images, openai_stub):
    openai_stub.inject_error(times=2, status=503)
    assert Retrying(images, delays=(0, 0, 0)).generate_image(ImagePrompt("p1")).startswith(PNG)


def test_a_slow_upstream_times_out(images, openai_stub):
    openai_stub.inject_delay(times=1, seconds=2.0, path="/images/edits")
    with pytest.raises(ProviderTimeout):
        images.edit_image(LocalProvider().generate_image(ImagePrompt("p1")), "blur")


def test_an_answer_that_is_not_a_png_is_malformed(images, openai_stub):
    openai_stub.inject_malformed(times=1, body='{"data": [{"b64_json": "aGVsbG8="}]}', path="/images/generations")
    with pytest.raises(ProviderError) as raised:
        images.generate_image(ImagePrompt("p1"))
    assert "not a PNG" in raised.value.reason
