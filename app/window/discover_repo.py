"""Discover's repository view: the chosen repository's facts, its quantizations with each
one's plan on this machine, the memory bar and the vision projector
(``DiscoverRepoView``, a part of ``DiscoverPage``)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.services.discover import DiscoverController, QuantPlan
from app.widgets.memory_bar import MemoryBar
from app.widgets.model_plan_view import VERDICT_COLORS
from app.widgets.styles import ERROR_STYLE
from app.window.discover_results import repo_facts
from app.wording.presenters import fit_summary
from engine import (
    QuantOption,
    RepoFiles,
    RepoSummary,
    format_bytes,
)

__all__ = ["DiscoverRepoView"]


class DiscoverRepoView:
    """Mixed into ``DiscoverPage``: builds the right-hand column and follows the
    controller's listing and plans for the repository opened."""

    controller: DiscoverController
    _options: list[QuantOption]

    def _build_repo_view(self) -> QWidget:
        self.repo_title = QLabel("Choose a repository")
        self.repo_title.setObjectName("repoTitle")
        font = self.repo_title.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)
        font.setBold(True)
        self.repo_title.setFont(font)
        self.repo_facts = QLabel()
        self.repo_facts.setWordWrap(True)
        self.quants = QTableWidget(0, 5)
        self.quants.setObjectName("quantTable")
        self.quants.setHorizontalHeaderLabels(["Quantization", "Size", "Files", "On this machine", ""])
        self.quants.verticalHeader().setVisible(False)
        self.quants.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.quants.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.quants.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.quants.horizontalHeader()
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.memory_bar = MemoryBar()
        self.plan_detail = QLabel()
        self.plan_detail.setObjectName("planDetail")
        self.plan_detail.setWordWrap(True)
        self.projector_label = QLabel()
        self.projector_label.setObjectName("projectorLabel")
        self.projector_button = QPushButton("Download projector")
        self.projector_button.setObjectName("downloadProjector")
        self.projector_button.setVisible(False)
        self.repo_error = QLabel()
        self.repo_error.setObjectName("repoError")
        self.repo_error.setStyleSheet(ERROR_STYLE)
        self.repo_error.setWordWrap(True)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.addWidget(self.repo_title)
        rv.addWidget(self.repo_facts)
        rv.addWidget(self.repo_error)
        rv.addWidget(self.quants, 1)
        rv.addWidget(self.memory_bar)
        rv.addWidget(self.plan_detail)
        prow = QHBoxLayout()
        prow.addWidget(self.projector_label, 1)
        prow.addWidget(self.projector_button)
        rv.addLayout(prow)
        return right

    def open_repo(self, summary: RepoSummary | str) -> None:
        repo_id = summary if isinstance(summary, str) else summary.repo_id
        self.repo_title.setText(repo_id)
        self.repo_facts.setText("" if isinstance(summary, str) else repo_facts(summary))
        self.repo_error.clear()
        self.quants.setRowCount(0)
        self._options = []
        self.memory_bar.set_devices(())
        self.plan_detail.clear()
        self.projector_label.clear()
        self.projector_button.setVisible(False)
        self.controller.open_repo(repo_id)

    # -- one repository -------------------------------------------------------------------------

    def _on_repo_failed(self, message: str) -> None:
        self.repo_error.setText(message)

    def _on_repo_loaded(self, listing: RepoFiles) -> None:
        self._options = list(listing.quants)
        self.quants.setRowCount(len(self._options))
        for i, option in enumerate(self._options):
            parts = f"{len(option.files)} parts" if option.is_split else "1 file"
            self.quants.setItem(i, 0, QTableWidgetItem(option.label))
            self.quants.setItem(i, 1, QTableWidgetItem(format_bytes(option.total_size)))
            self.quants.setItem(i, 2, QTableWidgetItem(parts))
            self.quants.setItem(i, 3, QTableWidgetItem("reading its header…"))
            button = QPushButton("Download")
            button.setObjectName(f"download-{option.label}")
            button.clicked.connect(lambda _c=False, o=option: self.controller.download(o))
            self.quants.setCellWidget(i, 4, button)
        gated = " · gated: needs a token with access" if listing.gated else ""
        self.repo_facts.setText((self.repo_facts.text() or listing.repo_id) + gated)
        if listing.projectors:
            p = listing.projectors[0]
            self.projector_label.setText(f"Vision projector: {p.name} ({format_bytes(p.size)})")
            self.projector_button.setVisible(True)
        if self._options:
            self.quants.selectRow(0)

    def _on_plan(self, plan: QuantPlan) -> None:
        for i, option in enumerate(self._options):
            if option.label != plan.label:
                continue
            item = self.quants.item(i, 3)
            if plan.plan is not None:
                item.setText(fit_summary(plan.plan))
                item.setForeground(_color(VERDICT_COLORS[plan.plan.verdict]))
            else:
                item.setText(plan.error or "")
                item.setForeground(_color("#d62728"))
            item.setToolTip(item.text())
        self._show_selected_plan()

    def _show_selected_plan(self) -> None:
        rows = self.quants.selectionModel().selectedRows()
        if not rows or rows[0].row() >= len(self._options):
            return
        option = self._options[rows[0].row()]
        planned = self.controller.plans.get(option.label)
        if planned is None or planned.plan is None:
            self.memory_bar.set_devices(())
            self.plan_detail.setText(planned.error if planned and planned.error else "")
            return
        self.memory_bar.set_devices(planned.plan.memory)
        read = planned.inspection
        source = (
            "from the cached header"
            if read is None or read.from_cache
            else f"from its header: {format_bytes(read.bytes_read)} in {read.requests} requests"
        )
        vision = f", with the vision projector {planned.projector}" if planned.projector else ""
        self.plan_detail.setText(
            f"{option.label}{vision}: {fit_summary(planned.plan)} — planned {source}, before any download."
        )

    def _download_projector(self) -> None:
        listing = self.controller.repo
        if listing is not None and listing.projectors:
            self.controller.download(listing.find(listing.projectors[0].path))


def _color(name: str):  # -> QBrush
    from PySide6.QtGui import QBrush, QColor

    return QBrush(QColor(name))
