"""Temporal's time-skipping test server, as the timer tests use it.

The server is the Java build from Maven Central (hack/test-server.sh), as the SDK's own download
is out of reach here.
"""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment


async def start_time_skipping() -> WorkflowEnvironment:
    # Resolved here, not at import: a test module defining a workflow is re-imported inside
    # the workflow sandbox, which refuses filesystem calls.
    root = Path(__file__).resolve().parents[2]
    exe = subprocess.run(
        ["bash", str(root / "hack/test-server.sh")], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    return await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        test_server_existing_path=exe,
        # The server is a JVM: the SDK's 5 s default is too short on a loaded 2-core machine
        # (CI saw it refuse connections at 5 s while xdist workers ran the e2e tiers).
        test_server_startup_timeout=timedelta(seconds=90),
    )


async def register_search_attributes(
    env: WorkflowEnvironment, keys: tuple[SearchAttributeKey[Any], ...]
) -> None:
    """As ``dmrollout temporal setup`` registers them."""
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                k.name: IndexedValueType.ValueType(k.indexed_value_type.value) for k in keys
            },
        )
    )
