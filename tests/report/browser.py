"""Load a page in headless Chromium, network off, and report what the browser saw.

Chromium is driven over ``--remote-debugging-pipe`` (the DevTools protocol on file descriptors 3 and
4, NUL-separated JSON), because ``--dump-dom`` alone cannot tell a console error from a console log
and never reports failed loads. The browser gets a fresh profile and every network path is closed:
hostnames resolve to nothing and any proxy is a dead loopback port.
"""

from __future__ import annotations

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

BROWSERS = ("chromium", "chromium-browser")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    # Network off: no name resolves, and anything that still tries goes to a closed port. Only
    # 127.0.0.1 is left as it is, for pages served on loopback (Chromium never proxies loopback).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--proxy-server=127.0.0.1:9",
    "--remote-debugging-pipe",
)  # fmt: skip
_TIMEOUT_S = 60.0
# What the test asks the loaded page: every chart's <svg> and the size it was laid out at.
_PROBE = """(() => {
  const charts = [...document.querySelectorAll('figure.gy-chart')].map(f => {
    const svg = f.querySelector(':scope > svg');
    const box = svg ? svg.getBoundingClientRect() : null;
    return {chart: f.dataset.chart, svgs: f.querySelectorAll('svg').length,
            width: box ? box.width : 0, height: box ? box.height : 0,
            paths: svg ? svg.querySelectorAll('path, use').length : 0};
  });
  return {charts, dom: document.documentElement.outerHTML};
})()"""


def find_browser() -> str | None:
    """The Chromium executable, if installed."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


@dataclass(kw_only=True, slots=True)
class Visit:
    """What happened while the page loaded."""

    charts: list[dict[str, Any]] = field(default_factory=list)
    """Per ``figure.gy-chart``: its id, its <svg> count and laid-out size."""
    dom: str = ""
    """The DOM after load, serialised."""
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions, error log entries, failed loads."""
    requests: list[str] = field(default_factory=list)
    """Every URL the page asked for."""


class _Pipe:
    def __init__(self, browser: str, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash puts our pipe ends on the descriptors Chromium expects (3 in, 4 out); dash cannot
        # redirect from descriptors above 9, which a test process easily has open.
        command = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        self.process = subprocess.Popen(
            ["bash", "-c", command, browser, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_for(self, method: str) -> None:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + _TIMEOUT_S
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(left, 0))
            if not ready:
                raise TimeoutError(f"Chromium said nothing for {_TIMEOUT_S:.0f} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe (did it start?)")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(line))

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self.call("Browser.close")
            # Let it exit by itself: killed early, its helpers keep writing into the profile
            # while the test deletes it.
            self.process.wait(timeout=_TIMEOUT_S)
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=_TIMEOUT_S)


def visit(browser: str, page: Path) -> Visit:
    """Load ``page`` (a local file) and collect what the browser reported."""
    return visit_url(browser, page.resolve().as_uri())


def visit_url(browser: str, url: str) -> Visit:
    """Load ``url`` (a file, or a server on loopback: Chromium never proxies loopback) and collect
    what the browser reported."""
    with tempfile.TemporaryDirectory(prefix="gy-chromium-") as profile:
        pipe = _Pipe(browser, Path(profile))
        try:
            return _visit(pipe, url)
        finally:
            pipe.close()


def _visit(pipe: _Pipe, url: str) -> Visit:
    targets = pipe.call("Target.getTargets")["targetInfos"]
    target = next(t for t in targets if t["type"] == "page")
    session = pipe.call("Target.attachToTarget", targetId=target["targetId"], flatten=True)
    sid = session["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        pipe.call(f"{domain}.enable", sid)
    pipe.events.clear()  # what about:blank said is not the page's
    pipe.call("Page.navigate", sid, url=url)
    pipe.wait_for("Page.loadEventFired")
    probe = pipe.call("Runtime.evaluate", sid, expression=_PROBE, returnByValue=True)
    value = probe["result"]["value"]
    return Visit(charts=value["charts"], dom=value["dom"], errors=_errors(pipe.events),
                 requests=[e["params"]["request"]["url"] for e in pipe.events
                           if e.get("method") == "Network.requestWillBeSent"])  # fmt: skip


def _errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            errors.append(f"console.{params['type']}: {params['args']}")
        elif method == "Runtime.exceptionThrown":
            errors.append(f"exception: {params['exceptionDetails']}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"log: {params['entry']['text']} {params['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            errors.append(f"load failed: {params.get('errorText')}")
    return errors
