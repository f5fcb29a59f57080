"""The one model of the app that answers chats: a GGUF loaded here (with phases, cancel,
unload, switch), or a model on a remote server (``use_remote``). Choosing one lets the
other go: loading a GGUF drops the remote model; using a remote one unloads the GGUF and
frees its memory."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.state.session import SessionState
from engine import (
    ChatModel,
    Engine,
    EngineError,
    LoadedModel,
    LoadPhase,
    LoadPlan,
    RemoteModel,
    SpeculationConfig,
)


class ModelSession(QObject):
    """Owns at most one LoadedModel. Loading another unloads the current one first."""

    state_changed = Signal(object)  # SessionState
    phase_started = Signal(object)  # LoadPhase
    phase_progress = Signal(object, float)
    phase_finished = Signal(object, float)
    load_failed = Signal(object)  # EngineError
    model_ready = Signal(object)  # LoadedModel
    model_unloaded = Signal()
    remote_ready = Signal(object)  # RemoteModel: it answers chats from now on

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.model: LoadedModel | None = None
        self.remote: RemoteModel | None = None
        self.state = SessionState.EMPTY
        self.error: EngineError | None = None
        self.speculation: SpeculationConfig | None = None

    @property
    def plan(self) -> LoadPlan | None:
        return self.model.plan if self.model is not None else None

    @property
    def ready_model(self) -> LoadedModel | None:
        return self.model if self.state is SessionState.READY else None

    @property
    def chat_model(self) -> ChatModel | None:
        """The model that answers chats now: the remote one in use, else the loaded one."""
        return self.remote if self.remote is not None else self.ready_model

    def use_remote(self, model: RemoteModel) -> None:
        """Answer chats with a model on a remote server (its replies stream from there)."""
        self.unload()
        self.error = None
        self.remote = model
        self._set_state(SessionState.READY)
        self.remote_ready.emit(model)

    def load(self, plan: LoadPlan, speculation: SpeculationConfig | None = None, force: bool = False) -> None:
        self.unload()
        self.error = None
        self.speculation = speculation
        model = Engine.load(plan, force=force, speculation=speculation, start=False)
        model.phase_started.connect(self.phase_started)
        model.phase_progress.connect(self.phase_progress)
        model.phase_finished.connect(self.phase_finished)
        model.ready.connect(lambda m=model: self._on_ready(m))
        model.load_failed.connect(lambda error, m=model: self._on_failed(m, error))
        model.worker_lost.connect(lambda error, m=model: self._on_worker_lost(m, error))
        self.model = model
        self._set_state(SessionState.LOADING)
        model.start()

    def cancel_load(self) -> None:
        if self.model is not None and self.state is SessionState.LOADING:
            self.model.cancel_load()

    def unload(self) -> None:
        """Let the model go: a loaded one is unloaded; a remote one is only forgotten (its
        replies still streaming finish as they would)."""
        remote, self.remote = self.remote, None
        model, self.model = self.model, None
        if model is None:
            if remote is not None:
                self._set_state(SessionState.EMPTY)
                self.model_unloaded.emit()
            return
        model.unload(wait=True)
        self._set_state(SessionState.EMPTY)
        self.model_unloaded.emit()

    def _on_ready(self, model: LoadedModel) -> None:
        if model is not self.model:
            return
        self._set_state(SessionState.READY)
        self.model_ready.emit(model)

    def _on_failed(self, model: LoadedModel, error: EngineError) -> None:
        if model is not self.model:
            return
        self.error = error
        model.unload(wait=True)
        self.model = None
        self._set_state(SessionState.FAILED)
        self.load_failed.emit(error)

    def _on_worker_lost(self, model: LoadedModel, error: EngineError) -> None:
        """An RPC worker of the loaded model was lost: its requests already failed (the
        chats keep what streamed) and the engine dropped it; say so, as for a failed load."""
        if model is not self.model:
            return
        self.error = error
        self.model = None
        self._set_state(SessionState.FAILED)
        self.load_failed.emit(error)
        self.model_unloaded.emit()

    def _set_state(self, state: SessionState) -> None:
        self.state = state
        self.state_changed.emit(state)


__all__ = ["LoadPhase", "ModelSession", "SessionState"]
