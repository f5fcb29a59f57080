"""The one-click fix for a conversation that outgrew the loaded context: the same load with
a context per conversation large enough for it, when the model can read that much and it
fits this machine."""

from __future__ import annotations

from dataclasses import replace

from engine import HardwareSnapshot, LoadPlan, PromptSize, plan_load

REPLY_ROOM = 1024  # tokens left for the reply (and the next turn or two) above the prompt


def needed_context(tokens: int) -> int:
    """The smallest power of two from 2,048 that holds ``tokens`` and room for a reply."""
    context = 2048
    while context < tokens + REPLY_ROOM:
        context *= 2
    return context


def context_fix(plan: LoadPlan, size: PromptSize, hardware: HardwareSnapshot) -> tuple[str, LoadPlan | None]:
    """What to tell the user about ``size`` not fitting ``plan``'s context, and the plan
    that fixes it (None when nothing as simple does)."""
    info = plan.model
    said = (
        f"This conversation is {size.tokens:,} tokens with your message; {info.display_name} was "
        f"loaded with {size.limit:,} per conversation."
    )
    train = info.context_length or 0
    if train and size.tokens > train:
        return (
            f"{said} That is more than it can read ({train:,} tokens): start a new chat, or "
            "shorten the message.",
            None,
        )
    context = needed_context(size.tokens)
    if train:
        context = min(context, train)
    fix = plan_load(info, hardware, replace(plan.request, context_per_conversation=context))
    if not fix.fits:
        return (
            f"{said} A {context:,}-token context does not fit this machine with "
            f"{plan.request.parallel} conversations: lower them under Models, or start a new chat.",
            None,
        )
    return f"{said} Reload it with a larger context to go on.", fix
