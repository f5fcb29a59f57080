"""Which model answers, chosen from the chat: the library's models (each planned with its
remembered load settings, so the picker shows the verdict Load would give) and the remote
servers' models; loading one with its remembered settings; the model a conversation was
written with, loaded for it; the last model, loaded at start."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject

from app.services.library import LibraryController
from app.services.model_session import ModelSession
from app.services.remote_servers import RemoteServers
from app.settings.load_settings import first_request, request_from_dict, request_speculation, settings_key
from app.settings.preferences import Preferences
from app.state.choices import ModelChoice
from app.state.session import SessionState
from app.store.history import ReplyModel, Store
from app.wording.presenters import fit_summary
from engine import (
    EngineError,
    HardwareSnapshot,
    LoadPlan,
    LoadRequest,
    ModelInfo,
    RemoteModel,
    RemoteModelInfo,
    SpeculationConfig,
    SpeculationMode,
    draft_candidates,
    format_bytes,
    inspect_model,
    plan_load,
)


def remembered_speculation(data: dict[str, Any] | None) -> SpeculationConfig | None:
    """The speculation a model was last loaded with, as the load panel would hand it over."""
    spec = str((data or {}).get("speculation", "off"))
    if spec == "lookup":
        return SpeculationConfig(SpeculationMode.PROMPT_LOOKUP)
    if spec.startswith("draft:") and Path(spec.removeprefix("draft:")).is_file():
        return SpeculationConfig(SpeculationMode.DRAFT_MODEL, draft_path=Path(spec.removeprefix("draft:")))
    return None


class ModelChooser(QObject):
    """Plans and loads models for the chat; the window's ``load`` and ``use_remote`` do the
    loading itself (they remember the settings and tell the dashboard)."""

    def __init__(
        self,
        store: Store,
        library: LibraryController,
        remote_servers: RemoteServers,
        session: ModelSession,
        hardware: Callable[[], HardwareSnapshot],
        load: Callable[[LoadPlan, SpeculationConfig | None], None],
        use_remote: Callable[[RemoteModelInfo], None],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.store = store
        self.library = library
        self.remote_servers = remote_servers
        self.session = session
        self.preferences = Preferences(store)
        self._hardware = hardware
        self._load = load
        self._use_remote = use_remote

    # -- what can answer ----------------------------------------------------------------

    def choices(self) -> list[ModelChoice]:
        """The library's models (planned now, with their remembered settings), then the
        remote servers' models."""
        hardware = self._hardware()
        answering = self._answering_key()
        rows = []
        for entry in self.library.entries():
            if entry.info is None or entry.is_projector:
                continue
            try:
                plan = plan_load(entry.info, hardware, self._remembered_request(entry.info.path))
            except EngineError as exc:  # remembered settings the planner now refuses
                rows.append(ModelChoice(entry.info.display_name, exc.message, entry.info.path))
                continue
            detail = f"{fit_summary(plan)} · {format_bytes(plan.total_bytes)}"
            rows.append(
                ModelChoice(
                    entry.info.display_name,
                    detail,
                    path=entry.info.path,
                    verdict=plan.verdict,
                    current=answering == ("local", str(entry.info.path)),
                )
            )
        for listing in self.remote_servers.listings():
            for info in listing.models:
                label = RemoteModel(info).label
                rows.append(
                    ModelChoice(
                        label.name, label.detail, remote=info, current=answering == ("remote", info.key)
                    )
                )
        return rows

    def _answering_key(self) -> tuple[str, object] | None:
        if self.session.remote is not None:
            return ("remote", self.session.remote.info.key)
        plan = self.session.plan
        if plan is not None and self.session.state in (SessionState.READY, SessionState.LOADING):
            return ("local", str(plan.model.path))
        return None

    # -- loading ------------------------------------------------------------------------

    def choose(self, choice: ModelChoice) -> str | None:
        """Load (or use) the chosen model; None, or the one-line reason it cannot be."""
        if choice.current:
            return None  # already answering, or on its way
        if choice.remote is not None:
            self._use_remote(choice.remote)
            return None
        assert choice.path is not None
        return self.load_path(choice.path)

    def plan_for(self, path: Path) -> LoadPlan:
        """The plan Load would make for ``path``: its remembered settings (or the defaults).
        Raises EngineError (an unreadable file, settings refused)."""
        entry = self.library.library.get(path)
        info = entry.info if entry is not None and entry.info is not None else inspect_model(path)
        # Settings' threads apply to every model without its own (never saved as its own).
        default_threads = self.preferences.default_threads() or None
        request = replace(self._remembered_request(info.path), default_threads=default_threads)
        return plan_load(info, self._hardware(), request)

    def load_path(self, path: Path) -> str | None:
        """Load ``path`` with its remembered settings; None, or why it cannot be."""
        try:
            plan = self.plan_for(path)
        except EngineError as exc:
            return exc.message
        data = self.store.get_setting(settings_key(plan.model.path))
        # Never loaded: the draft the library paired with it, as the load panel would start.
        self._load(plan, remembered_speculation(data) if data else request_speculation(plan.request))
        return None

    def load_writer(self, writer: ReplyModel | None) -> str | None:
        """Load the model that wrote a conversation (a library file, or a remote model still
        listed); its name, or None when it is not to be had."""
        if writer is None:
            return None
        remote = self._remote_writer(writer)
        if remote is not None:
            self._use_remote(remote)
            return writer.name
        path = Path(writer.file)
        if self.library.library.get(path) is None or not path.is_file():
            return None
        return writer.name if self.load_path(path) is None else None

    def loadable(self, writer: ReplyModel | None) -> bool:
        """Whether ``load_writer`` would find the model."""
        if writer is None:
            return False
        if self._remote_writer(writer) is not None:
            return True
        path = Path(writer.file)
        return self.library.library.get(path) is not None and path.is_file()

    def writer_notice(self, writer: ReplyModel | None) -> tuple[str, str] | None:
        """The chat's line for a conversation whose model is not the one answering (text,
        button), when that model can be had; None otherwise, and while a load goes on."""
        if (
            writer is None
            or self.session.state is SessionState.LOADING
            or self.is_answering(writer)
            or not self.loadable(writer)
        ):
            return None
        answering = self.session.chat_model
        now = f"; {answering.label.name} answers now" if answering is not None else ", which is not loaded"
        return f"This conversation is with {writer.name}{now}.", f"Load {writer.name}"

    def is_answering(self, writer: ReplyModel) -> bool:
        remote = self.session.remote
        if remote is not None:
            return remote.label.source == writer.file and remote.label.name == writer.name
        plan = self.session.plan
        return plan is not None and str(plan.model.path) == writer.file

    def load_last(self) -> str | None:
        """At start, when the preference is on: the model loaded last, with its remembered
        settings; its path, or None when nothing was loaded."""
        if not self.preferences.load_last_model():
            return None
        last = self.preferences.last_model()
        if last is None or not Path(last).is_file():
            return None
        return last if self.load_path(Path(last)) is None else None

    def load_for_chat(self, writer: ReplyModel | None) -> str | None:
        """Send or Continue with no model: load the conversation's own model, else the last
        one; the name of the model on its way, or None when there is none to load."""
        if self.load_writer(writer) is None:
            last = self.preferences.last_model()
            if last is None or self.load_path(Path(last)) is not None:
                return None
        plan = self.session.plan
        if self.session.state is SessionState.LOADING and plan is not None:
            return plan.model.display_name
        remote = self.session.remote
        return remote.label.name if remote is not None else None

    def remember_loaded(self, plan: LoadPlan) -> None:
        """A local model finished loading: the one to load next start."""
        self.preferences.set_last_model(str(plan.model.path))

    def _remembered_request(self, path: Path) -> LoadRequest:
        """The settings ``path`` was last loaded with; the first time, the defaults with the
        vision projector the library pairs with it (as Discover's Load does)."""
        data = self.store.get_setting(settings_key(path))
        request = request_from_dict(data, self._find_info) if isinstance(data, dict) else None
        if request is not None:
            return request
        entry = self.library.library.get(path)
        if entry is None or entry.info is None:
            return LoadRequest()
        hardware = self._hardware()
        others = (e.info for e in self.library.entries() if e.info is not None)
        return first_request(
            entry.info,
            tuple(self.library.projectors_for(entry)),
            self.preferences.default_gpu_layers(),
            hardware.has_usable_gpu or bool(hardware.remote_devices),
            draft_candidates(entry.info, others),
        )

    def _find_info(self, path: Path) -> ModelInfo | None:
        entry = self.library.library.get(path)
        return entry.info if entry is not None else None

    def _remote_writer(self, writer: ReplyModel) -> RemoteModelInfo | None:
        for listing in self.remote_servers.listings():
            for info in listing.models:
                if info.endpoint.base_url == writer.file and info.model_id == writer.name:
                    return info
        return None
