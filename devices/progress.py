"""Progress for several boards at once: a live rich display on a terminal, plain lines when piped."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class DeviceProgress:
    """One row per device; callback(name) gives deploy()'s progress(stage, detail, nbytes)."""

    def __init__(self, names: list[str], console: Console):
        self.console = console
        self.live = console.is_terminal
        self.lock = threading.Lock()
        self.stage: dict[str, str] = {}
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 DownloadColumn(), TimeElapsedColumn(), console=console, transient=False)
        self.tasks = {}
        if self.live:
            self.tasks = {n: self.progress.add_task(escape(f"{n}: waiting"), total=None) for n in names}

    def __enter__(self):
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.progress.stop()

    def callback(self, name: str):
        def update(stage: str, detail: str, nbytes: int) -> None:
            with self.lock:
                self._update(name, stage, detail, nbytes)
        return update

    def _update(self, name: str, stage: str, detail: str, nbytes: int) -> None:
        changed = self.stage.get(name) != stage
        self.stage[name] = stage
        if not self.live:
            if changed:
                self.console.print(escape(f"{name}: {stage} {detail}"), highlight=False)
            return
        task = self.tasks[name]
        if stage == "upload" and changed:
            total = _total(detail)
            self.progress.reset(task, total=total)
        if nbytes:
            self.progress.advance(task, nbytes)
        self.progress.update(task, description=escape(f"{name}: {stage} {detail}"[:60]))

    def done(self, name: str, failed: bool = False) -> None:
        with self.lock:
            if self.live:
                t = self.tasks[name]
                self.progress.update(t, description=escape(f"{name}: {'failed' if failed else 'done'}"),
                                     total=1, completed=1)
            else:
                self.console.print(escape(f"{name}: {'failed' if failed else 'done'}"), highlight=False)


def _total(detail: str) -> int | None:
    """'N files, B bytes' -> B."""
    try:
        return int(detail.split(",")[1].split()[0])
    except (IndexError, ValueError):
        return None
