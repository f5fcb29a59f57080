"""Pictures on a text-only model: the picture button explains in plain words and offers
the library's models that can see (one click loads one); a refusal on screen goes once
its cause is gone (the image removed, a model that can see loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

from app.chat import Composer
from app.chat.composer_pictures import IMAGES_NOT_SENT, NO_VISION_MODELS, TEXT_ONLY_MODEL
from app.chat.demo import sample_image
from app.state.session import SessionState
from app.window.main_window import MainWindow
from engine.devtools.tiny_models import TinyTextSpec, write_tiny_text_model
from tests.helpers import WAIT, drop, load, show_widget


@pytest.fixture()
def composer(qtbot) -> Composer:
    return show_widget(qtbot, Composer(), 700, 200)


def menu_texts(composer: Composer) -> list[str]:
    menu = composer.vision_menu
    assert menu is not None and menu.isVisible()
    return [a.text() for a in menu.actions() if a.text()]


def explanation(composer: Composer) -> str:
    assert composer.vision_menu is not None
    return composer.vision_menu.findChild(QLabel, "visionExplanation").text()


def test_the_picture_button_explains_and_offers_the_models_that_can_see(qtbot, composer) -> None:
    composer.set_attachments_enabled(False, TEXT_ONLY_MODEL)
    composer.set_vision_models(lambda: [("Gemma 3 4B", Path("/m/gemma-3-4b.gguf"))])
    button = composer.attach_button
    assert button.isEnabled()  # a click must do something
    assert button.toolTip().startswith("This model reads text only.")
    assert "projector" not in button.toolTip()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: composer.vision_menu is not None and composer.vision_menu.isVisible())
    assert explanation(composer) == TEXT_ONLY_MODEL
    assert "vision file (mmproj)" in explanation(composer)
    assert menu_texts(composer) == ["Load Gemma 3 4B"]
    load_gemma = composer.vision_menu.actions()[-1]
    with qtbot.waitSignal(composer.vision_model_chosen) as chosen:
        load_gemma.trigger()
    assert chosen.args == [Path("/m/gemma-3-4b.gguf")]
    assert not composer.error_label.isVisibleTo(composer)  # a menu, not an error


def test_without_a_model_that_can_see_the_menu_says_where_to_find_one(qtbot, composer) -> None:
    composer.set_attachments_enabled(False, TEXT_ONLY_MODEL)
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: composer.vision_menu is not None and composer.vision_menu.isVisible())
    none = next(a for a in composer.vision_menu.actions() if a.text() == NO_VISION_MODELS)
    assert not none.isEnabled() and "Discover" in none.text()
    composer.vision_menu.hide()
    qtbot.waitUntil(lambda: composer.vision_menu is None)


def test_a_pasted_picture_is_refused_until_a_model_that_sees_loads(qtbot, composer) -> None:
    composer.set_attachments_enabled(False, TEXT_ONLY_MODEL)
    assert composer.attach_images([("photo.png", sample_image())]) == []
    assert composer.error_label.isVisibleTo(composer) and composer.error_label.text() == TEXT_ONLY_MODEL
    composer.set_attachments_enabled(True, "Attach images (drop, paste, or choose files)")
    assert not composer.error_label.isVisibleTo(composer)


def test_the_refusal_goes_when_the_picture_is_removed(qtbot, composer) -> None:
    image = QImage(8, 8, QImage.Format.Format_RGB32)
    image.fill(Qt.GlobalColor.red)
    assert composer.attach_images([("photo.png", image)])
    composer.show_image_error(IMAGES_NOT_SENT)  # what the controller says when it refuses
    assert composer.error_label.isVisibleTo(composer)
    qtbot.mouseClick(composer.chips()[0].remove_button, Qt.MouseButton.LeftButton)
    assert composer.attachments() == ()
    assert not composer.error_label.isVisibleTo(composer)


def test_the_window_offers_the_library_model_with_a_vision_file_and_loads_it(
    qtbot, window: MainWindow, tiny_model: Path, tiny_projector: Path, tmp_path: Path
) -> None:
    wide = write_tiny_text_model(tmp_path / "wide.gguf", TinyTextSpec(n_embd=128, n_ff=256, name="Wide Tiny"))
    load(qtbot, window, wide)  # text only: no projector of its width
    load_path = window.library
    drop(window, tiny_model, tiny_projector)
    qtbot.waitUntil(lambda: load_path.library.get(tiny_projector) is not None, timeout=WAIT)
    qtbot.waitUntil(lambda: not load_path.busy, timeout=WAIT)
    composer = window.composer
    assert not composer.attachments_enabled()
    assert composer.attach_button.toolTip().startswith(TEXT_ONLY_MODEL)
    qtbot.mouseClick(composer.attach_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: composer.vision_menu is not None and composer.vision_menu.isVisible())
    name = load_path.library.get(tiny_model).display_name
    assert menu_texts(composer) == [f"Load {name}"]
    composer.vision_menu.actions()[-1].trigger()
    qtbot.waitUntil(
        lambda: (
            window.session.state is SessionState.READY
            and window.session.model is not None
            and window.session.model.plan.model.path == tiny_model
        ),
        timeout=WAIT,
    )
    qtbot.waitUntil(composer.attachments_enabled, timeout=WAIT)
