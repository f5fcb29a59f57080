"""Typed errors a user can cause. Each carries a one-line human ``message`` for the UI."""

from __future__ import annotations


class EngineError(Exception):
    """Base class: ``message`` is one line, written for the person using Hearth."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple:
        # Errors cross a process boundary (a split model runs in a child: engine/rpc). The
        # default pickling calls ``type(self)(*self.args)``, which breaks every subclass
        # whose __init__ takes other arguments (InvalidModelFile(path, reason)); rebuild
        # from the message and the instance's fields instead, whatever the signature.
        return (_restore_error, (type(self), self.message, self.__dict__.copy()))


def _restore_error(cls: type[EngineError], message: str, state: dict) -> EngineError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class InvalidModelFile(EngineError):
    """A file that is not a GGUF Hearth can use, with the reason why."""

    def __init__(self, path: object, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(reason)


class LoadFailed(EngineError):
    """llama.cpp could not load a model or create its context."""


class DoesNotFit(EngineError):
    """The plan says the model cannot be loaded on this machine."""


class Overloaded(EngineError):
    """Too many requests are waiting; the request was refused, not queued."""


class ImageRejected(EngineError):
    """An image that cannot be used in a prompt."""


class Cancelled(EngineError):
    """The user cancelled the operation."""


class NativeBuildUnsafe(EngineError):
    """The installed llama.cpp build crashed (or failed) in its self-check on this machine."""


class InvalidChatRequest(EngineError):
    """A request whose settings or content cannot be served. ``field``: the
    ``SamplingParams`` field at fault, when one is (the API names it in its 400)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ReplyInterrupted(EngineError):
    """A reply cut off partway by something other than the user (a remote server that went
    away mid-stream): what it said so far stands, saved as interrupted, and it can be
    continued."""


class WorkerUnavailable(EngineError):
    """An RPC worker that cannot be reached, or was lost while a model used it."""


class ModelProcessEnded(EngineError):
    """The child process that ran a split model (engine/model_process/process.py) ended
    without being asked to, and no worker of the model was found lost: it crashed."""
class HubError(EngineError):
    """Something between Hearth and the Hugging Face Hub went wrong (one line, with the fix)."""


class HubUnreachable(HubError):
    """No connection to the Hub (offline, DNS, refused, timed out)."""


class HubAccessDenied(HubError):
    """401/403: a gated or private repository and no (or the wrong) token."""


class HubNotFound(HubError):
    """404: no such repository, revision or file."""


class HubRateLimited(HubError):
    """429: the Hub asks us to slow down."""


class HubProtocolError(HubError):
    """The server answered something a download cannot use (lying sizes, truncated ranges)."""


class NoGgufFiles(HubError):
    """A repository that holds no GGUF model Hearth could download."""


class ChecksumMismatch(HubError):
    """A downloaded file whose SHA-256 is not the one the Hub publishes."""


class NotEnoughSpace(EngineError):
    """The models folder's disk cannot hold the download (checked before, or filled mid-way)."""


class UnsafeFileName(HubError):
    """A file name from a repository that would land outside the models folder."""
