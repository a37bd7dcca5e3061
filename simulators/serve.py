"""Running a simulator app as a process: listen, say where, stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from aiohttp import web


async def serve_until_signal(
    app: web.Application, host: str, port: int, *, ready_file: Path | None = None
) -> None:
    """Serve `app` until SIGTERM or SIGINT, then finish in-flight requests and clean up.

    Prints one JSON line `{"listening": "http://host:port"}` once the socket is bound (port 0
    picks a free port) and writes the same to `ready_file` when given, so a parent process can
    wait for it instead of polling.
    """
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0]
    line = json.dumps({"listening": f"http://{host}:{bound[1]}"})
    if ready_file is not None:
        # Written before the stdout line and renamed into place, so whoever sees either can
        # read a complete file.
        ready_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = ready_file.with_name(f".{ready_file.name}.tmp")
        tmp.write_text(line + "\n")
        tmp.replace(ready_file)
    print(line, flush=True)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        print(json.dumps({"stopped": True}), file=sys.stderr, flush=True)
