"""Hearth's main window: library on the left, the selected model and its plan on the right."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QLabel,
    QMainWindow,
    QSplitter,
    QTabWidget,
    QToolBar,
)

from app.library_controller import LibraryController
from app.paths import AppPaths
from app.widgets.hardware_panel import HardwarePanel
from app.widgets.library_panel import LibraryPanel
from app.widgets.model_panel import ModelPanel
from engine.hardware import HardwareSnapshot, take_snapshot


def dropped_paths(event: QDragEnterEvent | QDropEvent) -> list[Path]:
    """Local files ending in .gguf, and folders (scanned recursively)."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return []
    paths = []
    for url in mime.urls():
        if not url.isLocalFile():
            continue
        path = Path(url.toLocalFile())
        if path.is_dir() or path.suffix.lower() == ".gguf":
            paths.append(path)
    return paths


class MainWindow(QMainWindow):
    def __init__(self, paths: AppPaths, hardware: HardwareSnapshot | None = None) -> None:
        super().__init__()
        self.paths = paths
        self.setWindowTitle("Hearth")
        self.setAcceptDrops(True)
        self.resize(1200, 780)

        self.library = LibraryController(paths.library_file, default_folders=(paths.models_dir,), parent=self)
        self.library_panel = LibraryPanel(self.library)
        self.hardware_panel = HardwarePanel()
        self.model_panel = ModelPanel()

        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(self.library_panel)
        left.addWidget(self.hardware_panel)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 1)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.model_panel, "Model")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.tabs)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 5)
        self.splitter.setSizes([380, 820])
        self.setCentralWidget(self.splitter)

        self.add_files_action = QAction("Add models…", self)
        self.add_files_action.setShortcut(QKeySequence("Ctrl+O"))
        self.add_files_action.setToolTip("Add GGUF files to the library (they stay where they are)")
        self.add_files_action.triggered.connect(self.choose_files)
        self.add_folder_action = QAction("Add folder…", self)
        self.add_folder_action.setToolTip("Add every GGUF in a folder and its subfolders")
        self.add_folder_action.triggered.connect(self.choose_folder)
        self.rescan_action = QAction("Rescan", self)
        self.rescan_action.setShortcut(QKeySequence.StandardKey.Refresh)
        self.rescan_action.triggered.connect(self.library.rescan)
        toolbar = QToolBar("Library")
        toolbar.setObjectName("libraryToolbar")
        toolbar.setMovable(False)
        toolbar.addAction(self.add_files_action)
        toolbar.addAction(self.add_folder_action)
        toolbar.addAction(self.rescan_action)
        self.addToolBar(toolbar)
        self.status_label = QLabel()
        self.statusBar().addWidget(self.status_label, 1)

        self.library_panel.selection_changed.connect(self._on_selection)
        self.library.scan_finished.connect(self._on_scan_finished)
        self.library.busy_changed.connect(self._on_busy)
        self._hardware = hardware
        self._restore_geometry()

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> None:
        """Take the hardware snapshot and scan the library (after the window is shown)."""
        if self._hardware is None:
            self._hardware = take_snapshot()
        self.hardware_panel.set_snapshot(self._hardware)
        self.model_panel.set_hardware(self._hardware)
        self.library.rescan()

    def closeEvent(self, event) -> None:
        settings = QSettings(str(self.paths.data_dir / "window.ini"), QSettings.Format.IniFormat)
        settings.setValue("geometry", self.saveGeometry())
        settings.setValue("splitter", self.splitter.saveState())
        self.library.shutdown()
        super().closeEvent(event)

    def _restore_geometry(self) -> None:
        settings = QSettings(str(self.paths.data_dir / "window.ini"), QSettings.Format.IniFormat)
        geometry = settings.value("geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        state = settings.value("splitter")
        if isinstance(state, QByteArray):
            self.splitter.restoreState(state)

    # -- adding models --------------------------------------------------------------

    def choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add models", str(Path.home()), "GGUF models (*.gguf)")
        if files:
            self.library.add_paths([Path(f) for f in files])

    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of models", str(Path.home()))
        if folder:
            self.library.add_paths([Path(folder)])

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_paths(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = dropped_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.library.add_paths(paths, select=paths[0])

    # -- reactions ------------------------------------------------------------------

    def _on_selection(self, entry: object) -> None:
        if entry is None:
            self.model_panel.show_model(None)
        elif entry.info is None:
            self.model_panel.show_invalid(str(entry.path), entry.error or "unreadable")
        else:
            projectors = tuple(self.library.projectors_for(entry))
            self.model_panel.show_model(entry.info, projectors)

    def _on_scan_finished(self) -> None:
        if self.library_panel.selected_entry() is None:
            self.library_panel.select_first()
        counts = self.library.counts()
        self.status_label.setText(
            f"{counts.models} models · {counts.projectors} projectors"
            + (f" · {counts.invalid} unusable" if counts.invalid else "")
        )

    def _on_busy(self, busy: bool) -> None:
        if busy:
            self.status_label.setText("Scanning for models…")
