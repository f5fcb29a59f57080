"""Pictures in the composer: attaching them (files, paste, drop), their thumbnails, the
picture button and, on a text-only model, its menu of the models that can see."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMimeData, QPointF, QRectF, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QDragEnterEvent,
    QDropEvent,
    QIcon,
    QImage,
    QImageReader,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QToolButton,
    QWidget,
    QWidgetAction,
)

from app.chat.data import Attachment
from app.chat.message_painter import square_thumbnail

__all__ = [
    "IMAGES_NOT_SENT",
    "NO_MODEL_FOR_PICTURES",
    "NO_VISION_MODELS",
    "TEXT_ONLY_MODEL",
    "AttachmentChip",
    "ComposerPictures",
    "VisionModel",
    "image_icon",
    "png_bytes",
    "rounded",
]

MAX_IMAGE_BYTES = 50 * 2**20  # a sanity cap before reading a file into memory
CHIP_SIZE = 64
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.webp *.bmp *.gif)"
VISION_FILE = "a vision file (mmproj) beside it"
TEXT_ONLY_MODEL = f"This model reads text only. To use pictures, load a model that has {VISION_FILE}."
NO_MODEL_FOR_PICTURES = f"No model is loaded. To use pictures, load a model that has {VISION_FILE}."
IMAGES_NOT_SENT = "This model reads text only: pictures cannot be sent to it."
NO_VISION_MODELS = (
    "No model in the library has a vision file yet. On Discover, repositories that offer an "
    "mmproj file can see pictures: download both."
)

# (what the menu says, what ``vision_model_chosen`` carries: a model's path)
VisionModel = tuple[str, object]


class AttachmentChip(QFrame):
    """A thumbnail with a remove button in its corner."""

    remove_clicked = Signal()

    def __init__(self, attachment: Attachment, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachment = attachment
        self.setFixedSize(CHIP_SIZE + 8, CHIP_SIZE + 8)
        self.setToolTip(attachment.name)
        self.image = QLabel(self)
        self.image.setGeometry(0, 8, CHIP_SIZE, CHIP_SIZE)
        image = QImage.fromData(attachment.data)
        if not image.isNull():
            self.image.setPixmap(rounded(square_thumbnail(image, CHIP_SIZE, self.devicePixelRatioF()), 8))
        self.remove_button = QToolButton(self)
        self.remove_button.setObjectName("removeAttachment")
        self.remove_button.setText("×")
        self.remove_button.setToolTip(f"Remove {attachment.name}")
        self.remove_button.setGeometry(CHIP_SIZE - 12, 0, 20, 20)
        self.remove_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.remove_button.setStyleSheet(
            "QToolButton { border-radius: 10px; background: palette(window-text); color: palette(window);"
            " font-weight: bold; padding: 0 0 2px 0; }"
        )
        self.remove_button.clicked.connect(self.remove_clicked)


class ComposerPictures:
    """Mixed into ``Composer`` (which holds the signals and the widgets): the attachments
    and what the picture button offers."""

    _attachments: list[Attachment]
    _attachments_enabled: bool
    _attachments_reason: str
    _vision_models: Callable[[], Iterable[VisionModel]]
    vision_menu: QMenu | None
    _pasted: int
    thumbs: QWidget
    thumbs_layout: QHBoxLayout
    error_label: QLabel
    attach_button: QToolButton

    def set_attachments_enabled(self, enabled: bool, reason: str = "") -> None:
        """Images only when the loaded model can see: else the picture button says why
        (``TEXT_ONLY_MODEL``) and, clicked, offers the models that can see. A refusal on
        screen goes when this changes: its cause is gone."""
        if enabled != self._attachments_enabled:
            self.clear_error()
        self._attachments_enabled = enabled
        self._attachments_reason = reason
        self._update_attach_button()

    def set_vision_models(self, models: Callable[[], Iterable[VisionModel]]) -> None:
        """Where the picture menu finds the models that can see (asked when it opens):
        (name, key) pairs; choosing one emits ``vision_model_chosen(key)``."""
        self._vision_models = models

    def show_vision_menu(self) -> QMenu:
        """What the picture button does on a text-only model: why pictures cannot be
        attached, and the models in the library that can see them, one click each."""
        menu = QMenu(self)
        menu.setObjectName("visionMenu")
        menu.setToolTipsVisible(True)
        explanation = QLabel(self._refusal())
        explanation.setObjectName("visionExplanation")
        explanation.setWordWrap(True)
        explanation.setMinimumWidth(320)
        explanation.setContentsMargins(10, 6, 10, 6)
        text = QWidgetAction(menu)
        text.setDefaultWidget(explanation)
        menu.addAction(text)
        menu.addSeparator()
        models = list(self._vision_models())
        for name, key in models:
            action = menu.addAction(f"Load {name}")
            action.setToolTip(f"{name} has a vision file: it can see pictures")
            action.triggered.connect(lambda _checked=False, k=key: self.vision_model_chosen.emit(k))
        if not models:
            none = menu.addAction(NO_VISION_MODELS)
            none.setEnabled(False)
        self.vision_menu = menu
        menu.aboutToHide.connect(self._vision_menu_closed)
        menu.popup(self.attach_button.mapToGlobal(self.attach_button.rect().topLeft()))
        return menu

    def _vision_menu_closed(self) -> None:
        menu, self.vision_menu = self.vision_menu, None
        if menu is not None:
            menu.deleteLater()

    def attachments_enabled(self) -> bool:
        return self._attachments_enabled

    def attach_files(self, paths: Iterable[str | Path]) -> list[Attachment]:
        """Attach image files; ones that cannot be attached show why. Returns those added."""
        added: list[Attachment] = []
        errors: list[str] = []
        if not self._attachments_enabled:
            self.show_image_error(self._refusal())
            return added
        for raw in paths:
            path = Path(raw)
            try:
                size = path.stat().st_size
                if size > MAX_IMAGE_BYTES:
                    errors.append(
                        f"{path.name} is {size / 2**20:.0f} MiB; images up to {MAX_IMAGE_BYTES // 2**20} MiB "
                        "can be attached."
                    )
                    continue
                data = path.read_bytes()
            except OSError as exc:
                errors.append(f"Cannot read {path.name}: {exc.strerror or exc}")
                continue
            attachment = self._make_attachment(data, path.name)
            if attachment is None:
                errors.append(f"{path.name} is not an image Hearth can read.")
                continue
            added.append(attachment)
        self._add(added)
        if errors:
            self.show_image_error(" ".join(errors))
        return added

    def attach_images(self, images: Iterable[tuple[str, bytes | QImage]]) -> list[Attachment]:
        """Attach images given as (name, encoded bytes or QImage), e.g. from the clipboard."""
        if not self._attachments_enabled:
            self.show_image_error(self._refusal())
            return []
        added = []
        for name, data in images:
            raw = png_bytes(data) if isinstance(data, QImage) else data
            attachment = self._make_attachment(raw, name)
            if attachment is None:
                self.show_image_error(f"{name} is not an image Hearth can read.")
                continue
            added.append(attachment)
        self._add(added)
        return added

    def attachments(self) -> tuple[Attachment, ...]:
        return tuple(self._attachments)

    def remove_attachment(self, index: int) -> None:
        if 0 <= index < len(self._attachments):
            del self._attachments[index]
            self.clear_error()  # the refusal was about the images: its cause may be gone
            self._rebuild_thumbs()

    def clear_attachments(self) -> None:
        self._attachments.clear()
        self._rebuild_thumbs()

    def show_image_error(self, text: str) -> None:
        """Show why an image was refused (by the composer or by the engine) until the next
        attachment or message; empty text hides it."""
        self.error_label.setText(text)
        self.error_label.setVisible(bool(text))

    def choose_files(self) -> None:
        if not self._attachments_enabled:
            self.show_vision_menu()
            return
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach images", "", IMAGE_FILTER)
        if paths:
            self.attach_files(paths)

    # -- images from the clipboard and drops ---------------------------------------------

    def can_take(self, mime: QMimeData) -> bool:
        """Whether ``mime`` carries images (or files) that belong in the attachments."""
        return mime.hasImage() or any(url.isLocalFile() for url in mime.urls())

    def take(self, mime: QMimeData) -> bool:
        """Attach the images in ``mime``; False when it holds none (paste it as text)."""
        files = [url.toLocalFile() for url in mime.urls() if url.isLocalFile()]
        if files:
            self.attach_files(files)
            return True
        if mime.hasImage():
            image = mime.imageData()
            if isinstance(image, QPixmap):
                image = image.toImage()
            if isinstance(image, QImage) and not image.isNull():
                self._pasted += 1
                self.attach_images([(f"pasted image {self._pasted}.png", image)])
                return True
        return False

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self.can_take(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        if self.take(event.mimeData()):
            event.acceptProposedAction()

    def _refusal(self) -> str:
        return self._attachments_reason or TEXT_ONLY_MODEL

    def _make_attachment(self, data: bytes, name: str) -> Attachment | None:
        buffer = QBuffer()
        buffer.setData(QByteArray(data))
        buffer.open(QIODevice.OpenModeFlag.ReadOnly)
        reader = QImageReader(buffer)
        if not reader.canRead():
            return None
        fmt = bytes(reader.format().data()).decode("ascii", "replace").lower()
        mime = {"jpg": "image/jpeg", "jpeg": "image/jpeg", "svg": "image/svg+xml"}.get(fmt, f"image/{fmt}")
        return Attachment(data=data, name=name, mime_type=mime)

    def _add(self, attachments: list[Attachment]) -> None:
        if not attachments:
            return
        self.show_image_error("")
        self._attachments.extend(attachments)
        self._rebuild_thumbs()

    def _rebuild_thumbs(self) -> None:
        while self.thumbs_layout.count() > 1:
            item = self.thumbs_layout.takeAt(0)
            widget = item.widget()
            if widget is not None:
                widget.hide()
                widget.deleteLater()
        for index, attachment in enumerate(self._attachments):
            chip = AttachmentChip(attachment)
            chip.remove_clicked.connect(lambda i=index: self.remove_attachment(i))
            self.thumbs_layout.insertWidget(index, chip)
        self.thumbs.setVisible(bool(self._attachments))
        self._update_send_button()
        self.attachments_changed.emit()

    def chips(self) -> list[AttachmentChip]:
        """The thumbnails shown, in attachment order."""
        widgets = (self.thumbs_layout.itemAt(i).widget() for i in range(self.thumbs_layout.count()))
        return [w for w in widgets if isinstance(w, AttachmentChip)]

    def _update_attach_button(self) -> None:
        # Enabled either way: on a text-only model a click explains and offers the models
        # that can see (a disabled button did nothing). Dimmed then, so it does not look
        # like it attaches.
        self.attach_button.setProperty("textOnly", not self._attachments_enabled)
        self.attach_button.setToolTip(
            "Attach images (or drop or paste them here)"
            if self._attachments_enabled
            else self._refusal() + " Click for the models that can see."
        )
        self.attach_button.setAccessibleDescription(self.attach_button.toolTip())
        self.attach_button.setIcon(image_icon(self.palette(), dim=not self._attachments_enabled))


def png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def rounded(pixmap: QPixmap, radius: float) -> QPixmap:
    out = QPixmap(pixmap.size())
    out.setDevicePixelRatio(pixmap.devicePixelRatio())
    out.fill(Qt.GlobalColor.transparent)
    painter = QPainter(out)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    path = QPainterPath()
    size = pixmap.deviceIndependentSize()
    path.addRoundedRect(QRectF(0, 0, size.width(), size.height()), radius, radius)
    painter.setClipPath(path)
    painter.drawPixmap(0, 0, pixmap)
    painter.end()
    return out


def image_icon(palette: QPalette, dim: bool = False) -> QIcon:
    """A picture glyph (frame, hill, sun) drawn in the palette's text colours, so it fits
    light and dark themes without image files; disabled state drawn in the disabled colour,
    ``dim``: the normal state too (a text-only model: the button explains, it attaches nothing)."""
    icon = QIcon()
    for mode, group in (
        (QIcon.Mode.Normal, QPalette.ColorGroup.Disabled if dim else QPalette.ColorGroup.Active),
        (QIcon.Mode.Disabled, QPalette.ColorGroup.Disabled),
    ):
        color = palette.color(group, QPalette.ColorRole.WindowText)
        if mode is QIcon.Mode.Normal:
            color = QColor(color)
            color.setAlphaF(0.75)
        for scale in (1, 2):
            size = 20 * scale
            pixmap = QPixmap(size, size)
            pixmap.setDevicePixelRatio(scale)
            pixmap.fill(Qt.GlobalColor.transparent)
            painter = QPainter(pixmap)
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QPen(color, 1.6))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(2.5, 3.5, 15, 13), 2.5, 2.5)
            painter.drawEllipse(QPointF(13, 7.8), 1.6, 1.6)
            path = QPainterPath(QPointF(3.5, 15))
            path.lineTo(8, 10)
            path.lineTo(11.5, 13.5)
            path.lineTo(13, 12)
            path.lineTo(16.5, 15.5)
            painter.drawPath(path)
            painter.end()
            icon.addPixmap(pixmap, mode)
    return icon
