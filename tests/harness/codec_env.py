"""The payload-codec environment of the e2e tests: its own Temporal dev server whose UI decodes
through `dmrollout codec-server`, so the shared dev server keeps plain payloads for every other
test."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from controller.temporal import client as temporal_client
from localenv.processes import ManagedProcess
from localenv.temporal import TemporalDevServer

CODEC_KEY_ID = "e2e-2026-11"
CODEC_SERVER_PORT = 8281
CODEC_TEMPORAL_PORT = 7243
CODEC_UI_PORT = 8243


@dataclass(frozen=True)
class CodecEnv:
    temporal: TemporalDevServer
    codec_server: ManagedProcess
    # The one setting (plus the key ID) that turns the codec on, as controller and worker get it.
    env: dict[str, str]

    @property
    def settings(self) -> temporal_client.TemporalSettings:
        return temporal_client.TemporalSettings(
            address=self.temporal.address,
            payload_keys_dir=Path(self.env["DMROLLOUT_TEMPORAL_PAYLOAD_KEYS_DIR"]),
            payload_key_id=self.env["DMROLLOUT_TEMPORAL_PAYLOAD_KEY_ID"],
        )


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
