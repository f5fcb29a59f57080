"""The Chats page: conversations at the left, the chat in the middle, its settings at the right.

The settings column folds away (the header's Settings button), and folds by itself when
the chat would be squeezed narrower than it reads well, as when the dashboard docks
beside it on a small screen. The conversation list and the chat keep a floor width so
nothing is ever crushed to a scrollbar.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat import Composer, ConversationList, DocumentsButton, MessageView, SamplingPanel
from app.chat.model_picker import LoadLine, PickerButton
from app.chat.tool_approval import ToolApproval
from app.chat.tools_button import ToolsButton

LIST_MIN_WIDTH = 210
LIST_WIDTH = 260
CHAT_MIN_WIDTH = 420
SETTINGS_MIN_WIDTH = 250
SETTINGS_WIDTH = 290


class ChatHeader(QFrame):
    """The conversation's title, the model that will answer, the collections it searches
    (Documents), its tools (Tools) and the Settings toggle."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatHeader")
        self.title = QLabel()
        self.title.setObjectName("chatTitle")
        self.title.setTextFormat(Qt.TextFormat.PlainText)
        self.title.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.title.setFont(font)
        # The model that answers, as the picker's button: a click (Ctrl+M) chooses another.
        self.model = PickerButton()
        self.load_line = LoadLine()
        self.documents = DocumentsButton()
        self.tools = ToolsButton()
        self.settings_button = QToolButton()
        self.settings_button.setObjectName("settingsToggle")
        self.settings_button.setText("Settings")
        self.settings_button.setCheckable(True)
        self.settings_button.setToolTip("System prompt and sampling for this conversation")
        text = QVBoxLayout()
        text.setSpacing(0)
        text.addWidget(self.title)
        text.addWidget(self.model, 0, Qt.AlignmentFlag.AlignLeft)
        text.addWidget(self.load_line)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 6, 10, 6)
        layout.addLayout(text, 1)
        layout.addWidget(self.documents, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.tools, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.settings_button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.setStyleSheet("QFrame#chatHeader { border-bottom: 1px solid palette(mid); }")
        self._title_text = ""

    def set_title(self, title: str) -> None:
        self._title_text = title
        self._elide()

    def set_model(self, text: str) -> None:
        self.model.set_full_text(text)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        label, text = self.title, self._title_text
        width = max(40, label.width())
        label.setText(label.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, width))
        label.setToolTip(text if label.text() != text else "")


class ChatNotice(QFrame):
    """One line above the composer for what the user must know before sending (a base model
    that will ramble, a conversation too long for the loaded context), with the fix as a
    button when there is one."""

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatNotice")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.button = QPushButton()
        self.button.setObjectName("noticeAction")
        self.button.clicked.connect(self.action_clicked)
        self.button.hide()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(16, 6, 12, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignVCenter)
        self.setStyleSheet(
            "QFrame#chatNotice { background: #fff4d6; border-top: 1px solid #e8d49a; }"
            "QFrame#chatNotice QLabel { color: #5c4400; }"
        )
        self.hide()

    def show_notice(self, text: str, action: str = "") -> None:
        self.label.setText(text)
        self.button.setText(action)
        self.button.setVisible(bool(action))
        self.setVisible(bool(text))

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""


class ChatsPage(QSplitter):
    """Conversation list | header, messages, notice, composer | settings (foldable)."""

    settings_visibility_changed = Signal(bool)

    def __init__(
        self,
        conversations: ConversationList,
        view: MessageView,
        composer: Composer,
        settings: SamplingPanel,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.setObjectName("chatsPage")
        self.conversations = conversations
        self.view = view
        self.composer = composer
        self.settings = settings
        self.header = ChatHeader()
        self.notice = ChatNotice()
        self.approval = ToolApproval()  # a tool call waiting for the user's allow
        column = QWidget()
        column.setObjectName("chatColumn")
        layout = QVBoxLayout(column)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.header)
        layout.addWidget(view, 1)
        layout.addWidget(self.approval)
        layout.addWidget(self.notice)
        layout.addWidget(composer)
        self.column = column

        conversations.setMinimumWidth(LIST_MIN_WIDTH)
        column.setMinimumWidth(CHAT_MIN_WIDTH)
        settings.setMinimumWidth(SETTINGS_MIN_WIDTH)
        self.addWidget(conversations)
        self.addWidget(column)
        self.addWidget(settings)
        self.setStretchFactor(0, 0)
        self.setStretchFactor(1, 1)
        self.setStretchFactor(2, 0)
        for index in range(3):
            self.setCollapsible(index, False)
        self.setSizes([LIST_WIDTH, 800, SETTINGS_WIDTH])
        self._settings_wanted = True  # what the user chose; the room decides what shows
        self._settings_over_list = False
        self.header.settings_button.setChecked(True)
        self.header.settings_button.toggled.connect(self._settings_toggled)

    # -- settings column -------------------------------------------------------------------

    def settings_shown(self) -> bool:
        return not self.settings.isHidden()

    def list_shown(self) -> bool:
        return not self.conversations.isHidden()

    def settings_wanted(self) -> bool:
        return self._settings_wanted

    def set_settings_wanted(self, wanted: bool) -> None:
        """Show or fold the settings column as the user asks (remembered by the window)."""
        self._settings_wanted = wanted
        self._settings_over_list = False
        self._fit()

    def _settings_toggled(self, checked: bool) -> None:
        self._settings_wanted = checked
        # Asked for where there is no room for all three columns: the settings take the
        # conversation list's place until they are folded again.
        self._settings_over_list = checked and not self._room_for(LIST_MIN_WIDTH, SETTINGS_MIN_WIDTH)
        self._fit()
        self.settings_visibility_changed.emit(checked)

    def _room_for(self, *columns: int) -> bool:
        handles = len(columns) * self.handleWidth()
        return self.width() >= CHAT_MIN_WIDTH + sum(columns) + handles

    def _fit(self) -> None:
        """Which columns show at this width: the chat always; the settings when wanted and
        there is room (or in the list's place, when asked for without room); the list
        otherwise."""
        settings = self._settings_wanted and (
            self._room_for(LIST_MIN_WIDTH, SETTINGS_MIN_WIDTH)
            or (self._settings_over_list and self._room_for(SETTINGS_MIN_WIDTH))
        )
        conversations = not settings or self._room_for(LIST_MIN_WIDTH, SETTINGS_MIN_WIDTH)
        opening = settings and not self.settings_shown()
        self.conversations.setVisible(conversations)
        self.settings.setVisible(settings)
        if opening:
            sizes = self.sizes()
            list_width = sizes[0] if conversations else 0
            self.setSizes([list_width, max(CHAT_MIN_WIDTH, sizes[1] - SETTINGS_WIDTH), SETTINGS_WIDTH])
        button = self.header.settings_button
        button.blockSignals(True)
        button.setChecked(settings)
        button.blockSignals(False)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def minimumSizeHint(self) -> QSize:
        # What the page folds down to (the chat alone), not the sum of its open columns:
        # the window and the dashboard dock can then take the room, and _fit folds.
        return QSize(CHAT_MIN_WIDTH, super().minimumSizeHint().height())

    # -- header and notice -------------------------------------------------------------------

    def set_notice(self, text: str, action: str = "") -> None:
        """A line above the composer, with an optional one-click fix; empty text hides it."""
        self.notice.show_notice(text, action)
