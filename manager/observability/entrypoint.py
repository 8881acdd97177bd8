"""How a kfed process (the manager, the worker shim) runs its main coroutine: tracing set up
before anything logs, the coroutine run until SIGTERM or SIGINT, the spans still batched
flushed on the way out, and a port already taken reported as one line instead of a trace."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from manager.kube.process import pace_garbage_collector, run_until_signalled
from manager.observability.server import ListenError
from manager.telemetry import tracing


def run_process(
    main: Coroutine[Any, Any, None],
    *,
    service_name: str,
    display_name: str,
    log_level: str,
    log_format: str = "text",
) -> int:
    """Run ``main`` as the whole process; ``service_name`` names its spans."""
    provider = tracing.setup(service_name, log_level, log_format)
    pace_garbage_collector()
    try:
        asyncio.run(run_until_signalled(main))
    except ListenError as err:
        raise SystemExit(f"{display_name}: {err}") from None
    finally:
        if provider is not None:
            provider.shutdown()  # flush the spans still batched
    return 0
