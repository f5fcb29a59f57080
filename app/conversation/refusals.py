"""What the chat refuses, and how: the reasons said when a message cannot be sent or a reply
cannot be touched now (no model, a reply still generating, a conversation too long for the
loaded context, an image the model cannot take), and the message given back to the composer.

The rule behind the waits: switching versions, editing, regenerating and deleting wait until
the conversation is not generating, since the reply being written belongs to the path shown.
"""

from __future__ import annotations

from app.chat import Attachment, Composer
from engine import DecodedImage, PromptSize, check_message_images, load_image

NO_MODEL = "Load a model first: choose one at the top of the chat (Ctrl+M) or under Models."
WAIT_FOR_REPLY = "Wait for the reply, or stop it (Esc), before sending again."
WAIT_TO_SWITCH = "Wait for the reply, or stop it (Esc), before switching versions."
WAIT_TO_DELETE = "Wait for the reply, or stop it (Esc), before deleting messages."
WAIT_TO_REGENERATE = "Wait for the reply, or stop it (Esc), before regenerating."
STOP_TO_EDIT = "Stop the reply before editing."

WAITING_FOR_LOAD = "Your message is sent when {name} is loaded."
WRITTEN_AFTER_LOAD = "The reply is written when {name} is loaded."


def too_long_message(size: PromptSize) -> str:
    return (
        f"This conversation with your message is {size.tokens:,} tokens; the model was loaded "
        f"with {size.limit:,} per conversation."
    )


def decoded_attachments(attachments: list[Attachment]) -> list[DecodedImage]:
    """The attachments decoded and checked together, before anything is stored; raises
    ``ImageRejected`` with the reason for the first one refused."""
    images = [load_image(a.data, name=a.name) for a in attachments]
    check_message_images(images)
    return images


def give_back(composer: Composer, text: str, attachments: list[Attachment], reason: str) -> None:
    """The user's message back in the composer, with the reason under it."""
    composer.set_text(text)
    if attachments:
        composer.attach_images([(a.name, a.data) for a in attachments])
    composer.show_image_error(reason)
