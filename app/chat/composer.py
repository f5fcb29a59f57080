"""Where the user writes: a growing text box, image attachments, Send / Stop."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QEvent,
    QIODevice,
    QMimeData,
    QPointF,
    QRectF,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QColor,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QFont,
    QIcon,
    QImage,
    QImageReader,
    QKeyEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPixmap,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
    QWidgetAction,
)

from app.chat.data import Attachment
from app.chat.message_view import square_thumbnail
from app.chat.theme import ChatColors

MAX_IMAGE_BYTES = 50 * 2**20  # a sanity cap before reading a file into memory
MIN_LINES = 2
MAX_LINES = 10
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


class _InputEdit(QPlainTextEdit):
    """The text box: Enter/Shift+Enter/Ctrl+Enter/Esc, and images by paste or drop."""

    def __init__(self, composer: Composer) -> None:
        super().__init__(composer)
        self._composer = composer
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setTabChangesFocus(True)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.viewport().setAutoFillBackground(False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._composer._fit_height()  # wrapping changed

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        mods = event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
            shift = bool(mods & Qt.KeyboardModifier.ShiftModifier)
            plain = mods == Qt.KeyboardModifier.NoModifier
            if ctrl or (self._composer.send_on_enter() and plain):
                self._composer.submit()
                return
            if shift or plain:
                # Always a newline (Qt would insert a line separator for Shift+Enter).
                self.textCursor().insertText("\n")
                self.ensureCursorVisible()
                return
        if key == Qt.Key.Key_Escape:
            self._composer.escape()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return self._composer.can_take(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if not self._composer.take(source):
            super().insertFromMimeData(source)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self._composer.can_take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        if self._composer.can_take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dragMoveEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:
        if self._composer.take(event.mimeData()):
            event.acceptProposedAction()
        else:
            super().dropEvent(event)


class _AttachmentChip(QFrame):
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
            self.image.setPixmap(_rounded(square_thumbnail(image, CHIP_SIZE, self.devicePixelRatioF()), 8))
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


class Composer(QWidget):
    """The message box under the conversation.

    Enter sends and Shift+Enter starts a new line (``set_send_on_enter(False)``: Enter is a
    newline and Ctrl+Enter sends); Esc asks to stop the reply. Images come by drag-and-drop,
    paste or the attach button, only while ``set_attachments_enabled(True)``.
    """

    submitted = Signal(str, list)  # text, list[Attachment]
    stop_requested = Signal()
    edit_cancelled = Signal()
    attachments_changed = Signal()
    generating_changed = Signal(bool)
    draft_changed = Signal()  # the text typed so far changed (the context count follows it)
    vision_model_chosen = Signal(object)  # a model that can see, picked in the picture menu

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._send_on_enter = True
        self._generating = False
        self._editing = False
        self._attachments_enabled = True
        self._attachments_reason = ""
        self._vision_models: Callable[[], Iterable[VisionModel]] = tuple
        self.vision_menu: QMenu | None = None  # the picture button's, while it is open
        self._attachments: list[Attachment] = []
        self._pasted = 0
        self.setAcceptDrops(True)

        self.edit_banner = QFrame()
        self.edit_banner.setObjectName("editBanner")
        banner_layout = QHBoxLayout(self.edit_banner)
        banner_layout.setContentsMargins(10, 4, 4, 4)
        self.edit_label = QLabel(
            "Editing a message: sending adds it as a new version, with a new reply; "
            "the earlier version and its replies are kept (‹ › under the message)."
        )
        self.edit_label.setWordWrap(True)
        cancel_edit = QPushButton("Cancel")
        cancel_edit.setFlat(True)
        cancel_edit.clicked.connect(self.cancel_edit)
        banner_layout.addWidget(self.edit_label, 1)
        banner_layout.addWidget(cancel_edit)
        self.edit_banner.hide()

        self.error_label = QLabel()
        self.error_label.setObjectName("imageError")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()

        self.thumbs = QWidget()
        self.thumbs_layout = QHBoxLayout(self.thumbs)
        self.thumbs_layout.setContentsMargins(10, 6, 10, 0)
        self.thumbs_layout.setSpacing(6)
        self.thumbs_layout.addStretch(1)
        self.thumbs.hide()

        self.input = _InputEdit(self)
        self.input.setObjectName("composerInput")
        self.input.textChanged.connect(self._text_changed)

        self.attach_button = QToolButton()
        self.attach_button.setObjectName("attachButton")
        self.attach_button.setAccessibleName("Attach pictures")
        self.attach_button.setAutoRaise(True)
        self.attach_button.setIconSize(QSize(20, 20))
        self.attach_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.attach_button.clicked.connect(self.choose_files)
        self.hint = QLabel()
        self.hint.setObjectName("composerHint")
        # How much of the conversation's context the chat so far plus this draft takes.
        self.context_label = QLabel()
        self.context_label.setObjectName("contextUsage")
        self.context_label.hide()
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.send_button.clicked.connect(self._send_clicked)

        bar = QHBoxLayout()
        bar.setContentsMargins(6, 0, 8, 6)
        bar.addWidget(self.attach_button)
        bar.addWidget(self.hint, 1)
        bar.addWidget(self.context_label)
        bar.addWidget(self.send_button)

        self.card = QFrame()
        self.card.setObjectName("composerCard")
        card_layout = QVBoxLayout(self.card)
        card_layout.setContentsMargins(1, 1, 1, 1)
        card_layout.setSpacing(2)
        card_layout.addWidget(self.thumbs)
        card_layout.addWidget(self.input)
        card_layout.addLayout(bar)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 6, 16, 12)
        outer.setSpacing(6)
        outer.addWidget(self.edit_banner)
        outer.addWidget(self.error_label)
        outer.addWidget(self.card)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self.set_placeholder("Message the model…")
        self._apply_style()
        self._update_attach_button()
        self._update_hint()
        self._update_send_button()
        self._fit_height()

    # -- public -----------------------------------------------------------------------

    def set_send_on_enter(self, enabled: bool) -> None:
        self._send_on_enter = enabled
        self._update_hint()

    def send_on_enter(self) -> bool:
        return self._send_on_enter

    def set_generating(self, generating: bool) -> None:
        """While a reply streams, Send becomes Stop (and Enter does not send)."""
        changed = generating != self._generating
        self._generating = generating
        self._update_send_button()
        self._update_hint()
        if changed:
            self.generating_changed.emit(generating)

    def is_generating(self) -> bool:
        return self._generating

    def set_context_usage(self, tokens: int | None, limit: int = 0) -> None:
        """Show "1,234 / 4,096 tokens": the context the conversation and the draft take
        (None hides it). Amber from 90% of the limit, red past it."""
        if tokens is None or limit <= 0:
            self.context_label.hide()
            return
        colors = ChatColors.from_palette(self.palette())
        over = tokens > limit
        color = colors.error if over else (colors.warning if tokens >= 0.9 * limit else colors.muted)
        self.context_label.setText(f"{tokens:,} / {limit:,} tokens")
        self.context_label.setStyleSheet(f"color: {color.name()};" + (" font-weight: 600;" if over else ""))
        self.context_label.setToolTip(
            "The conversation with this message is longer than the model was loaded for."
            if over
            else "How much of this conversation's context the chat so far and your message take."
        )
        self.context_label.show()

    def context_usage_text(self) -> str:
        return self.context_label.text() if self.context_label.isVisible() else ""

    def clear_error(self) -> None:
        """Forget the last refusal (a new chat, another model, the user typing again)."""
        self.error_label.clear()
        self.error_label.hide()

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
            raw = _png_bytes(data) if isinstance(data, QImage) else data
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

    def text(self) -> str:
        return self.input.toPlainText()

    def set_text(self, text: str) -> None:
        self.input.setPlainText(text)
        cursor = self.input.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.input.setTextCursor(cursor)

    def clear(self) -> None:
        self.input.clear()
        self.clear_attachments()
        self.show_image_error("")

    def set_placeholder(self, text: str) -> None:
        self.input.setPlaceholderText(text)

    def focus_input(self) -> None:
        self.input.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def begin_edit(self, text: str, attachments: Iterable[Attachment] = ()) -> None:
        """Load a sent message back for editing; a banner offers to cancel."""
        self._editing = True
        self.set_text(text)
        self._attachments = list(attachments)
        self._rebuild_thumbs()
        self.edit_banner.show()
        self.focus_input()

    def cancel_edit(self) -> None:
        if not self._editing:
            return
        self._editing = False
        self.edit_banner.hide()
        self.clear()
        self.edit_cancelled.emit()

    def is_editing(self) -> bool:
        return self._editing

    def submit(self) -> bool:
        """Send what is written (as Enter does). False when there is nothing to send or a
        reply is still streaming."""
        text = self.text().strip()
        if self._generating or not (text or self._attachments):
            return False
        attachments = list(self._attachments)
        self._editing = False
        self.edit_banner.hide()
        self.clear()
        self.submitted.emit(text, attachments)
        return True

    def escape(self) -> None:
        """Esc: stop the reply; while editing a message (and nothing streams), stop editing."""
        if self._editing and not self._generating:
            self.cancel_edit()
        else:
            self.stop_requested.emit()

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

    # -- internals --------------------------------------------------------------------

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
            chip = _AttachmentChip(attachment)
            chip.remove_clicked.connect(lambda i=index: self.remove_attachment(i))
            self.thumbs_layout.insertWidget(index, chip)
        self.thumbs.setVisible(bool(self._attachments))
        self._update_send_button()
        self.attachments_changed.emit()

    def chips(self) -> list[_AttachmentChip]:
        """The thumbnails shown, in attachment order."""
        widgets = (self.thumbs_layout.itemAt(i).widget() for i in range(self.thumbs_layout.count()))
        return [w for w in widgets if isinstance(w, _AttachmentChip)]

    def _send_clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self.submit()

    def _text_changed(self) -> None:
        self._fit_height()
        self._update_send_button()
        self.clear_error()
        self.draft_changed.emit()

    def _fit_height(self) -> None:
        """Grow with the text (wrapped lines included) from MIN_LINES to MAX_LINES, then
        scroll."""
        doc = self.input.document()
        layout = doc.documentLayout()
        line = self.input.fontMetrics().lineSpacing()
        limit = MAX_LINES * line
        content = 0.0
        block = doc.begin()
        # blockBoundingRect lays a block out on demand; stop once past the limit so a
        # huge paste does not lay out the whole text here.
        while block.isValid() and content <= limit:
            content += layout.blockBoundingRect(block).height()
            block = block.next()
        text_height = max(MIN_LINES * line, min(limit, math.ceil(content)))
        margins = self.input.contentsMargins()
        height = text_height + 2 * int(doc.documentMargin()) + margins.top() + margins.bottom()
        if self.input.height() != height:
            self.input.setFixedHeight(height)

    def _update_send_button(self) -> None:
        if self._generating:
            self.send_button.setText("Stop")
            self.send_button.setToolTip("Stop the reply (Esc)")
            self.send_button.setEnabled(True)
            self.send_button.setProperty("stop", True)
        else:
            self.send_button.setText("Send")
            self.send_button.setToolTip("Send (Enter)" if self._send_on_enter else "Send (Ctrl+Enter)")
            self.send_button.setEnabled(bool(self.text().strip() or self._attachments))
            self.send_button.setProperty("stop", False)
        # Re-polish so the [stop="true"] style rule applies.
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)

    def _update_hint(self) -> None:
        if self._generating:
            text = "Esc to stop"
        elif self._send_on_enter:
            text = "Enter to send · Shift+Enter for a new line"
        else:
            text = "Ctrl+Enter to send · Enter for a new line"
        self.hint.setText(text)

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
        self.attach_button.setIcon(_image_icon(self.palette(), dim=not self._attachments_enabled))

    def _apply_style(self) -> None:
        colors = ChatColors.from_palette(self.palette())
        self.attach_button.setIcon(_image_icon(self.palette(), dim=not self._attachments_enabled))
        self.error_label.setStyleSheet(f"color: {colors.error.name()};")
        muted = colors.muted.name()
        self.hint.setStyleSheet(f"color: {muted};")
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.86))
        self.hint.setFont(small)
        self.context_label.setFont(small)
        # palette(...) keeps the stylesheet following light/dark palette changes.
        self.setStyleSheet(
            f"QFrame#composerCard {{ background: palette(base); border: 1px solid {colors.track.name()};"
            " border-radius: 12px; }"
            "QFrame#editBanner { background: palette(alternate-base); border-radius: 8px; }"
            "QPlainTextEdit#composerInput { background: transparent; border: none; padding: 6px 8px 0 8px; }"
            "QPushButton#sendButton { background: palette(highlight); color: palette(highlighted-text);"
            " border: none; border-radius: 8px; padding: 5px 16px; font-weight: 600; }"
            f"QPushButton#sendButton:disabled {{ background: {colors.track.name()}; color: {muted}; }}"
            f'QPushButton#sendButton[stop="true"] {{ background: {colors.error.name()}; color: white; }}'
        )

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_style()


def _png_bytes(image: QImage) -> bytes:
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return bytes(data.data())


def _rounded(pixmap: QPixmap, radius: float) -> QPixmap:
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


def _image_icon(palette: QPalette, dim: bool = False) -> QIcon:
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
