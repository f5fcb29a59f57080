"""The question Ctrl+Q and the close button ask while replies are generating."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget

from engine import plural


def confirm_quit(parent: QWidget, streaming: int) -> bool:
    """Whether the user quits with ``streaming`` replies generating (they are kept, as
    interrupted, and Continue goes on from there next time)."""
    verb = "is" if streaming == 1 else "are"
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "Quit Hearth?",
        f"{plural(streaming, 'reply', 'replies')} {verb} still generating. Quit anyway?",
        parent=parent,
    )
    box.setObjectName("quitConfirmation")
    box.setInformativeText("What they wrote so far is kept: Continue goes on from there next time.")
    quit_button = box.addButton("Quit", QMessageBox.ButtonRole.AcceptRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(quit_button)
    box.exec()
    return box.clickedButton() is quit_button
