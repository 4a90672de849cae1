"""Drive headless Chromium over the DevTools protocol, with nothing but the standard library.

Why this way: ``--remote-debugging-pipe`` speaks the DevTools protocol over two
file descriptors (Chromium reads commands on fd 3 and writes replies and events on
fd 4, each message a JSON text ended by a NUL byte). That needs no TCP port, no
websocket package and no browser download, and it reports every network request
and console message as an event, which is exactly what the report tests assert on.

Used by tests/test_report_browser.py and benchmarks/bench_report.py.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("NEURONPROBE_CHROMIUM", "/usr/bin/chromium")
# The flags the issue asks for: headless, no sandbox (containers), and no
# background traffic of the browser's own, so every request we see is the page's.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
)
COMMAND_TIMEOUT_S = 20.0  # a cold start on a loaded 2-core CI box can take several seconds


class ChromiumMissing(RuntimeError):
    pass


@dataclass
class PageLoad:
    """What happened while a page loaded: requests, console output, errors, timing."""

    url: str
    requests: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)  # (level, text)
    exceptions: list[str] = field(default_factory=list)
    load_ms: float = 0.0

    @property
    def errors(self) -> list[str]:
        return [text for level, text in self.console if level in ("error", "assert")] + self.exceptions

    def foreign_requests(self) -> list[str]:
        """Requests other than the page itself (data: URLs never reach the network)."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]


def find_chromium() -> str:
    path = CHROMIUM if os.path.exists(CHROMIUM) else (shutil.which("chromium") or shutil.which("chromium-browser"))
    if not path:
        raise ChromiumMissing(
            f"headless Chromium not found at {CHROMIUM}: install the Debian package with "
            "`apt-get install -y chromium` (or set NEURONPROBE_CHROMIUM to the binary)"
        )
    return path


class Browser:
    """One headless Chromium with a fresh profile, and one page in it."""

    def __init__(self, width: int = 1200, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="np-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:  # runs in the child: put the pipe ends on fds 3 and 4
            # First copy both ends above 4, so neither copy can land on 3 or 4 and be overwritten.
            a = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - Chromium's log, read when it fails; closed in close()
        self.proc = subprocess.Popen(
            [find_chromium(), *FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            preexec_fn=wire_fds,
            close_fds=False,  # pass_fds=(3, 4) would fail when the parent has no fd 3 or 4 open
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Network", "Runtime", "Log"):
                self.page(f"{domain}.enable")
            self.page("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise

    # -- protocol ---------------------------------------------------------------
    def _send(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _pump(self, timeout: float) -> list[dict[str, Any]]:
        """Read what has arrived within ``timeout`` seconds; return the complete messages."""
        ready, _, _ = select.select([self._from_browser], [], [], timeout)
        if ready:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the DevTools pipe:\n{self.stderr_tail()}")
            self._buffer += chunk
        messages = []
        while b"\0" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\0", 1)
            messages.append(json.loads(raw))
        return messages

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        wanted = self._send(method, params, session)
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while time.monotonic() < deadline:
            for message in self._pump(0.2):
                if message.get("id") == wanted:
                    if "error" in message:
                        raise RuntimeError(f"{method}: {message['error']}")
                    return message.get("result", {})
                self.events.append(message)
        raise TimeoutError(f"Chromium did not answer {method} within {COMMAND_TIMEOUT_S} s")

    def page(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.call(method, params, self.session)

    def wait_for(self, event: str, since: int, timeout: float = COMMAND_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.get("method") == event for e in self.events[since:]):
                return
            self.events.extend(self._pump(0.1))
        raise TimeoutError(f"no {event} within {timeout} s")

    def settle(self, seconds: float = 0.3) -> None:
        """Collect the events still in flight (late console messages, lazy requests)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.events.extend(self._pump(0.05))

    # -- what the tests use --------------------------------------------------------
    def load(self, path: Path) -> PageLoad:
        url = path.resolve().as_uri()
        mark = len(self.events)
        start = time.perf_counter()
        self.page("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired", mark)
        load_ms = (time.perf_counter() - start) * 1000
        self.settle()
        result = PageLoad(url=url, load_ms=load_ms)
        for event in self.events[mark:]:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                result.requests.append(params["request"]["url"])
            elif method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                result.console.append((params.get("type", ""), text))
            elif method == "Log.entryAdded":
                entry = params["entry"]
                result.console.append((entry.get("level", ""), entry.get("text", "")))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                result.exceptions.append(details.get("exception", {}).get("description") or details.get("text", ""))
        return result

    def evaluate(self, expression: str) -> Any:
        reply = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression!r} raised: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.page("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.page("Page.captureScreenshot", params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def stderr_tail(self, n: int = 4000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-n:]

    def close(self) -> None:
        try:
            self._send("Browser.close", None, None)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._log.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
