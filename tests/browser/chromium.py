"""Headless Chromium (Debian's ``chromium``, installed by ``scripts/chromium``) for the pages.

Each call starts one browser with a fresh profile, no network services of its own (no sync,
no component updates, no background networking, no QUIC) and no sandbox (it runs as root in
CI containers), waits for it with a bound, and kills its whole process group if the bound
passes. ``python -m tests.browser.chromium PAGE.html OUT.png`` takes a screenshot by hand
(that is how ``docs/img`` is made).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
NO_BROWSER_ENV = "PRICING_HA_NO_BROWSER"  # set to 1 to skip the browser tests, knowingly


def executable() -> str | None:
    """The Chromium on ``PATH``, if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str], timeout_s: float) -> str:
    """Run Chromium with ``args`` and a fresh profile; its stdout."""
    exe = executable()
    if exe is None:
        raise FileNotFoundError("no chromium on PATH: run scripts/chromium (Debian's package)")
    with tempfile.TemporaryDirectory(prefix="pricing-ha-chromium-") as profile:
        proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its renderer and zygote go with it on a timeout
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"chromium exited {proc.returncode}: {err[-2000:]}")
        return out


def dump_dom(page: Path, *, timeout_s: float = 60.0) -> str:
    """The DOM of ``page`` once Chromium has loaded it, serialised."""
    return _run(["--dump-dom", page.resolve().as_uri()], timeout_s)


def screenshot(
    page: Path, png: Path, *, width: int = 1200, height: int = 1600, timeout_s: float = 60.0
) -> Path:
    """A PNG of ``page`` in a ``width`` x ``height`` window, written to ``png``."""
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    _run(
        [
            f"--window-size={width},{height}",
            f"--screenshot={png.resolve()}",
            page.resolve().as_uri(),
        ],
        timeout_s,
    )
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot of {page}")
    return png


if __name__ == "__main__":
    page_arg, png_arg, *size = sys.argv[1:]
    w, h = (int(v) for v in size) if size else (1200, 1600)
    print(screenshot(Path(page_arg), Path(png_arg), width=w, height=h))
