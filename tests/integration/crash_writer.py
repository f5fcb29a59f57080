"""Writes to a Hearth store the way the app does, until it is killed (tests/integration/test_store_crash.py).

    python tests/crash_writer.py DATABASE SEED

Startup is the app's: open (recovering whatever the previous kill left), mark interrupted
replies, collect garbage. Then it prints ``ready`` and loops: a user message (sometimes
with an image), a reply streamed with update_reply every ~20 ms, finish_reply; or, now and
then, another version of the last reply (regenerate_reply), streamed the same way. After each
message is finished (the call has returned, so its transaction is committed) it prints
``completed <id> <sha256 of its text>``, flushed: the test holds the store to every line.
"""

from __future__ import annotations

import hashlib
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.store.history import Message, MessageState, Store

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "llamas", "decode", "tokens")
SHARED_IMAGE = b"\x89PNG\r\n\x1a\n" + b"shared image, stored once" * 40


def report(message: Message) -> None:
    digest = hashlib.sha256(message.text.encode()).hexdigest()
    print(f"completed {message.id} {digest}", flush=True)


def main() -> None:
    database, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    store = Store(database)
    store.mark_interrupted_replies()
    store.collect_garbage()
    existing = store.list_conversations()
    conversation = existing[0] if existing else store.create_conversation("crash test")
    print("ready", flush=True)

    turn = 0
    last_reply: Message | None = None  # in this conversation, by this process
    while True:
        turn += 1
        if last_reply is not None and rng.random() < 0.2:
            reply = store.regenerate_reply(last_reply.id)
        else:
            if rng.random() < 0.15:
                conversation = store.create_conversation(f"chat {seed}.{turn}")
            images: list[tuple[bytes, str]] = []
            if rng.random() < 0.3:
                images.append((SHARED_IMAGE, "image/png"))
            if rng.random() < 0.2:
                images.append((b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randint(100, 20_000)), "image/png"))
            question = " ".join(rng.choices(WORDS, k=rng.randint(3, 40))) + "?"
            report(store.add_message(conversation.id, "user", question, images))
            reply = store.begin_reply(conversation.id)
        text = ""
        for _ in range(rng.randint(3, 30)):
            # A long reply: hundreds of characters per flush, tens of kilobytes in the end.
            text += " ".join(rng.choices(WORDS, k=rng.randint(20, 150))) + "\n"
            store.update_reply(reply.id, text)
            time.sleep(0.02)
        state = MessageState.COMPLETE if rng.random() < 0.8 else MessageState.CANCELLED
        finished = store.finish_reply(
            reply.id,
            text + "(end)",
            state,
            stop_reason="stop token" if state is MessageState.COMPLETE else "cancelled",
            stats={"usage": {"completion_tokens": len(text) // 4}, "timings": {"ttft": 0.1}},
            tokens=[rng.randrange(262_144) for _ in range(len(text) // 4)],
        )
        last_reply = finished
        if state is MessageState.COMPLETE:
            report(finished)


if __name__ == "__main__":
    main()
