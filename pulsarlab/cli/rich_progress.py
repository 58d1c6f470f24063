"""The rich display of :mod:`pulsarlab.cli.progress`, loaded only when a terminal shows it."""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import Progress, ProgressColumn, SpinnerColumn, Task, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from pulsarlab.progress import Reporter


class MarkColumn(SpinnerColumn):
    """A spinner while the step runs; a green tick once it ended well, a red cross if not."""

    def render(self, task: Task) -> RenderableType:
        ok = task.fields.get("ok")
        if ok is None:
            return super().render(task)
        return Text("✓", style="green") if ok else Text("✗", style="bold red")


class StatusColumn(ProgressColumn):
    """The step's status word, red when it failed; never read as markup (it may hold brackets)."""

    def render(self, task: Task) -> Text:
        return Text(task.fields.get("status", ""), style="red" if task.fields.get("ok") is False else "cyan")


class RichReporter(Reporter):
    """Each step is a line: a spinner while it runs (a mark once over), its label, its status and
    its elapsed seconds; a note is printed above the steps."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            MarkColumn(),
            TextColumn("{task.description}", markup=False),
            StatusColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
            refresh_per_second=8,
        )
        self.tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()

    def note(self, message: str) -> None:
        self.progress.console.print(Text.assemble(("· ", "dim"), message), highlight=False)

    def begin(self, key: str, label: str, status: str = "", total: float | None = None, unit: str = "") -> None:
        with self._lock:
            old = self.tasks.pop(key, None)
            if old is not None:  # a key used again (a node restarted): the old line stays as it ended
                self.progress.stop_task(old)
            self.tasks[key] = self.progress.add_task(label, total=total, status=status, ok=None)

    def update(self, key: str, status: str | None = None, completed: float | None = None) -> None:
        task = self.tasks.get(key)
        if task is None:
            return
        fields: dict[str, Any] = {} if status is None else {"status": status}
        self.progress.update(task, completed=completed, **fields)

    def end(self, key: str, status: str = "done", ok: bool = True) -> None:
        with self._lock:
            task = self.tasks.pop(key, None)
        if task is None:
            return
        self.progress.update(task, status=status, ok=ok)
        self.progress.stop_task(task)

    def close(self) -> None:
        with self._lock:
            for task in self.tasks.values():  # steps cut short by an error: frozen where they were
                self.progress.stop_task(task)
            self.tasks.clear()
        self.progress.stop()
