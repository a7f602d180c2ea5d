"""The live progress display of create/wait/destroy: on a terminal only, on stderr. It shows the events
azgpu.deploy emits through its on_event/on_notice hooks; deploy itself displays nothing."""

from __future__ import annotations

import copy
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..deploy.interface import Event


class NullProgress:
    """No display at all (a caller that passes no log)."""

    def __init__(self, log=None):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, event: Event) -> None:
        if self.log and event.state in ("succeeded", "failed", "exists", "accepted", "scaling in", "deleted"):
            self.log(f"{event.name}: {event.state}" + (f" ({event.error})" if event.error else ""))

    def notice(self, message: str) -> None:
        if self.log:
            self.log(message)


class LineProgress:
    """Without a terminal (CI, pipes, -o json): one line on stderr per change of a resource's state,
    so a log shows what is happening while it happens; results stay alone on stdout."""

    def __init__(self, log):
        self.log = log
        self.started = time.monotonic()
        self._last: dict[str, tuple] = {}
        self._lock = threading.Lock()  # scale sets report from worker threads

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, event: Event) -> None:
        state = (event.state, event.done, event.error)
        with self._lock:
            if event.state == "pending" or self._last.get(event.key) == state:
                return
            self._last[event.key] = state
            line = f"[{time.monotonic() - self.started:4.0f} s] {event.name} ({event.stage}): {event.state}"
            if event.has_instances:
                line += f", {event.done}/{event.total} VMs"
            if event.error:
                line += f": {event.error}"
            self.log(line)

    def notice(self, message: str) -> None:
        with self._lock:
            self.log(f"[{time.monotonic() - self.started:4.0f} s] {message}")


class LiveProgress:
    """Per resource and per scale set: state, instances succeeded / total, elapsed."""

    def __init__(self, title: str):
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.events: dict[str, Event] = {}
        self.notices: list[str] = []
        self.started = time.monotonic()
        self.console = Console(stderr=True)
        self._lock = threading.RLock()  # update() starts Live, which renders under the same lock
        self._shown = False
        self.live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False,
                         get_renderable=self._table)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"{self.title}  ({time.monotonic() - self.started:.0f} s)", title_justify="left")
        for col in ("resource", "kind", "state", "instances", "elapsed"):
            table.add_column(col)
        colors = {"succeeded": "green", "exists": "green", "failed": "red", "creating": "yellow", "accepted": "cyan",
                  "scaling in": "magenta", "deleting": "magenta", "deleted": "magenta"}
        with self._lock:
            events = list(self.events.values())
        now = time.monotonic()
        for e in events:
            end = e.finished or now
            elapsed = f"{end - e.started:.0f} s" if e.started else ""
            instances = f"{e.done}/{e.total}" if e.has_instances else ""
            state = f"[{colors.get(e.state, 'white')}]{_safe(e.state)}[/]"
            table.add_row(_safe(e.name), _safe(e.stage), state, instances, elapsed)
        for n in self.notices[-3:]:
            table.add_row(f"[dim]{_safe(n)}[/]", "", "", "", "")
        return table

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._shown:
            return self.live.__exit__(*exc)
        return False

    def update(self, event: Event) -> None:
        with self._lock:
            self.events[event.key] = copy.copy(event)  # a snapshot: the deployer goes on updating its own
            if not self._shown:  # the table appears with the first resource, after the preflight
                self._shown = True
                self.live.__enter__()

    def notice(self, message: str) -> None:
        self.notices.append(message)


def _safe(text: str) -> str:
    """Text from Azure in the live table: control characters as escapes, and no rich markup of its own."""
    from rich.markup import escape

    from ..output import terminal_text

    return escape(terminal_text(str(text)))


def progress_for(title: str, output: str, *, verbose: bool = False, log=None):
    if output != "json" and sys.stderr.isatty():
        return LiveProgress(title)
    return LineProgress(log) if log else NullProgress()
