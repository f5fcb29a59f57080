"""Images through the engine: tiny text model + tiny CLIP projector."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from PIL import Image

from engine.base.errors import EngineError, ImageRejected
from engine.catalog import inspect_model, inspect_projector
from engine.chat import ChatMessage
from engine.devtools.tiny_models import TinyProjectorSpec, write_tiny_projector
from engine.loaded_model import Engine, LoadedModel
from engine.machine.hardware import take_snapshot
from engine.multimodal import DecodedImage, ProjectorRuntime, load_image
from engine.planner import LoadPhase, LoadRequest, plan_load
from engine.requests.completion import StopReason
from engine.requests.events import Prefill
from engine.requests.request import ChatRequest
from engine.sampling.params import GREEDY
from tests.conftest import plan_for

TIMEOUT = 60


def png(color: tuple[int, int, int], size: tuple[int, int] = (32, 32)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def red() -> DecodedImage:
    return load_image(png((220, 30, 30)), name="red.png")


@pytest.fixture(scope="module")
def blue() -> DecodedImage:
    return load_image(png((30, 30, 220), (48, 40)), name="blue.png")


@pytest.fixture()
def vision(tiny_model: Path, tiny_projector: Path):
    plan = plan_for(tiny_model, ctx=1024, parallel=4, projector=inspect_projector(tiny_projector))
    model = Engine.load(plan).wait_ready(TIMEOUT)
    yield model
    model.unload()


def ask(text: str, *images: DecodedImage, **kwargs: object) -> ChatRequest:
    options: dict[str, object] = {"sampling": GREEDY, "max_tokens": 8, **kwargs}
    return ChatRequest(messages=(ChatMessage("user", text, images=images),), **options)  # type: ignore[arg-type]


def count_image_evaluations(model: LoadedModel, delay: float = 0.0) -> list[str]:
    """Wrap the projector's eval_media; return the list it appends identities to."""
    runtime: ProjectorRuntime = model._executor._native.projector
    calls: list[str] = []
    original = runtime.eval_media

    def counting(lctx, media, n_past, seq_id, n_batch):
        calls.append(media if isinstance(media, str) else media.identity)
        if delay:
            time.sleep(delay)
        return original(lctx, media, n_past, seq_id, n_batch)

    runtime.eval_media = counting  # type: ignore[method-assign]
    return calls


def test_projector_loads_as_its_own_phase(vision: LoadedModel) -> None:
    assert LoadPhase.PROJECTOR in vision.plan.phases
    assert vision.plan.phases.index(LoadPhase.PROJECTOR) > vision.plan.phases.index(LoadPhase.WEIGHTS)
    assert vision.has_vision


def test_mismatched_projector_is_refused_before_loading(tmp_path: Path, tiny_model: Path) -> None:
    wrong = write_tiny_projector(tmp_path / "mmproj-wrong.gguf", TinyProjectorSpec(n_embd_text=32))
    with pytest.raises(EngineError) as info:
        plan_load(inspect_model(tiny_model), take_snapshot(), LoadRequest(projector=inspect_projector(wrong)))
    assert "32" in info.value.message and "64" in info.value.message


def test_image_request_to_a_model_without_projector_fails_clearly(
    tiny_model: Path, red: DecodedImage
) -> None:
    model = Engine.load(plan_for(tiny_model)).wait_ready(TIMEOUT)
    try:
        assert not model.has_vision
        with pytest.raises(ImageRejected, match="vision projector"):
            model.submit(ask("what is this?", red)).wait(TIMEOUT)
    finally:
        model.unload()


def test_two_image_conversations_and_a_text_one_share_the_context(
    vision: LoadedModel, red: DecodedImage, blue: DecodedImage
) -> None:
    handles = [
        vision.submit(ask("What colour is this?", red, owner="a")),
        vision.submit(ask("And this one?", blue, owner="b")),
        vision.submit(ask("Just text, please.", owner="c")),
    ]
    completions = [h.wait(TIMEOUT) for h in handles]
    assert [c.usage.images for c in completions] == [1, 1, 0]
    for completion in completions:
        assert completion.stop_reason in (StopReason.LENGTH, StopReason.STOP_TOKEN)
    # The tiny projector turns a 32x32 image into 16 tokens.
    assert completions[0].usage.prompt_tokens >= 16


def test_prefill_progress_counts_images(vision: LoadedModel, red: DecodedImage, blue: DecodedImage) -> None:
    handle = vision.submit(ask("Compare these two.", red, blue))
    prefills = [e for e in handle.events(timeout=TIMEOUT) if isinstance(e, Prefill)]
    assert prefills[-1].images_total == 2
    assert prefills[-1].images_done == 2


def test_follow_up_about_the_same_image_does_not_encode_it_again(
    vision: LoadedModel, red: DecodedImage
) -> None:
    calls = count_image_evaluations(vision)
    first = vision.submit(ask("Describe this picture.", red)).wait(TIMEOUT)
    assert len(calls) == 1
    follow_up = ChatRequest(
        messages=(
            ChatMessage("user", "Describe this picture.", images=(red,)),
            first.as_message(),
            ChatMessage("user", "What else is in it?"),
        ),
        sampling=GREEDY,
        max_tokens=8,
    )
    second = vision.submit(follow_up).wait(TIMEOUT)
    assert len(calls) == 1, "the image was encoded again"
    assert second.usage.cached_images == 1
    assert second.usage.cached_tokens >= first.usage.prompt_tokens


def test_the_same_picture_pasted_again_is_the_same_image(vision: LoadedModel) -> None:
    first = load_image(png((10, 200, 10)))
    again = load_image(png((10, 200, 10)))
    assert first.identity == again.identity
    calls = count_image_evaluations(vision)
    vision.submit(ask("Look.", first)).wait(TIMEOUT)
    vision.submit(ask("Look.", again)).wait(TIMEOUT)
    assert len(calls) == 1


def test_cancel_while_an_image_is_evaluated_ends_only_that_request(
    vision: LoadedModel, red: DecodedImage, blue: DecodedImage
) -> None:
    count_image_evaluations(vision, delay=0.3)
    victim = vision.submit(ask("Slow picture.", red, max_tokens=8))
    bystander = vision.submit(ask("Plain text, still served.", max_tokens=8))
    time.sleep(0.1)  # inside the image evaluation
    victim.cancel()
    assert victim.wait(TIMEOUT).stop_reason is StopReason.CANCELLED
    assert bystander.wait(TIMEOUT).usage.completion_tokens == 8
    after = vision.submit(ask("Another look.", blue)).wait(TIMEOUT)
    assert after.usage.images == 1


def test_too_many_images_in_one_message_are_refused(vision: LoadedModel, red: DecodedImage) -> None:
    handle = vision.submit(ask("So many.", *([red] * 9)))
    with pytest.raises(ImageRejected, match="images"):
        handle.wait(TIMEOUT)
