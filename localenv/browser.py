"""Headless Chromium as the UI checks drive it (Debian's ``chromium``; ``playwright install``
downloads a browser build of its own, which this machine cannot fetch)."""

from __future__ import annotations

from typing import Final

CHROMIUM: Final = "/usr/bin/chromium"
# No proxy: the UI is on 127.0.0.1 in the namespace, and a proxy from the environment could
# only make Chromium try (and fail) to leave it. The rest keeps Chromium from phoning home.
CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-proxy-server",
]
