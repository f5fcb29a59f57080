"""Where the user writes: the composer that holds a growing text box, image attachments
and Send / Stop together.

The parts: ``composer_edit`` (the text box and its keys), ``composer_pictures`` (the
attachments, their thumbnails and the picture button, mixed in here) and ``composer_send``
(the Send / Stop button and the hint beside it)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import (
    QEvent,
    QSize,
    Qt,
    Signal,
)
from PySide6.QtGui import (
    QFont,
)
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.composer_edit import ComposerEdit
from app.chat.composer_pictures import ComposerPictures, VisionModel, image_icon
from app.chat.composer_send import SendButton, hint_text
from app.chat.data import Attachment
from app.chat.theme import ChatColors


class Composer(ComposerPictures, QWidget):
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

        self.input = ComposerEdit(self, self)
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
        self.send_button = SendButton()
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
        self.input.fit_height()

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

    def _send_clicked(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self.submit()

    def _text_changed(self) -> None:
        self.input.fit_height()
        self._update_send_button()
        self.clear_error()
        self.draft_changed.emit()

    def _update_send_button(self) -> None:
        self.send_button.show_state(
            self._generating, self._send_on_enter, bool(self.text().strip() or self._attachments)
        )

    def _update_hint(self) -> None:
        self.hint.setText(hint_text(self._generating, self._send_on_enter))

    def _apply_style(self) -> None:
        colors = ChatColors.from_palette(self.palette())
        self.attach_button.setIcon(image_icon(self.palette(), dim=not self._attachments_enabled))
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
