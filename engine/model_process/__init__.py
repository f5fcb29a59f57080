"""A model served from a child process (a split model over RPC workers): the parent's proxy,
the child's loop, the messages between them and what a lost child means.
"""

from engine.base.lazy import lazy_exports

_EXPORTS = {
    "ModelProcess": "process",
    "ChildAnswer": "protocol",
    "ChildEvent": "protocol",
    "ChildSignal": "protocol",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
