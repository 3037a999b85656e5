"""The server ends with its editor, even when its event loop is stuck.

An editor that crashes or is killed sends no `exit`, and a server whose loop hangs never sees
its stdin close: such a server outlived its editor for over an hour. A daemon thread here polls
every `POLL_S` whether the editor is still there: the process `initialize` named in `processId`
(os.kill(pid, 0)), and the server's own parent (os.getppid() changes when it dies: the server is
handed to init or a subreaper). When either is gone, `on_orphaned` runs on that thread (it
kills the workers and ends the process), whatever the loop is doing.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 2.0


def process_exists(pid: int) -> bool:
    """Whether `pid` is a live process (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError, OSError):
        return False
    return True


class Lifeline:
    """Watches the editor's process and the server's parent from a daemon thread."""

    def __init__(self, on_orphaned: Callable[[str], None], poll_s: float = POLL_S) -> None:
        self._on_orphaned = on_orphaned
        self._poll_s = poll_s
        self._parent = os.getppid()
        self.watch_parent = True
        """False for `serve --tcp`: started from a shell, it may outlive that shell."""
        self._editor: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="stitch-lifeline", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def watch_editor(self, pid: object) -> str | None:
        """Watch the `processId` from `initialize` as well. One that does not exist now (the
        editor that sent it is running) belongs to another PID namespace (a container) and
        is not watched: the sentence returned says so. None or a bad value: nothing to watch."""
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == os.getpid():
            return None
        if not process_exists(pid):
            return (
                f"initialize named processId {pid}, which is not a process here (another PID "
                "namespace?); only the server's parent process is watched"
            )
        self._editor = pid
        return None

    def check(self) -> str | None:
        """Why the editor is gone, or None while it is there."""
        editor = self._editor
        if editor is not None and not process_exists(editor):
            return f"the editor's process {editor} has ended"
        if self.watch_parent and self._parent > 1 and os.getppid() != self._parent:
            return f"the parent process {self._parent} has ended"
        return None

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            why = self.check()
            if why is not None:
                log.warning("stitch-lsp: %s; exiting", why)
                self._on_orphaned(why)
                return
