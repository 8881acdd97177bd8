"""Run a credentials plugin the platform configured (an access provider's ``execConfig``), as
client-go runs one: its command with its args, the manager's environment plus the
provider's ``env``, ``KUBERNETES_EXEC_INFO`` set, no stdin, a deadline; its stdout is the
ExecCredential. Only clusterprofiles.py's providers come here: a kubeconfig Secret's exec
plugin is refused before anything runs (kubeconfig.py)."""

from __future__ import annotations

import asyncio
import json
import os

from manager.federation.workers.clusterprofiles import (
    REASON_CREDENTIALS_FAILED,
    Access,
    Credential,
    ProfileProblem,
    exec_info,
    parse_credential,
)
from manager.kube.tasks import stop_tasks

STDERR_SHOWN = 300
"""Characters of the plugin's stderr kept in the condition's message."""


async def fetch(access: Access, *, timeout: float) -> Credential:
    """The credential the provider's plugin prints; raises ProfileProblem (CredentialsFailed)."""
    provider = access.provider
    env = {**os.environ, **dict(provider.env)}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(exec_info(access))
    try:
        proc = await asyncio.create_subprocess_exec(
            provider.command,
            *provider.args,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as err:
        raise ProfileProblem(
            REASON_CREDENTIALS_FAILED,
            f"credentials plugin of provider {provider.name!r} cannot start: {err}",
        ) from None
    talk = asyncio.ensure_future(proc.communicate())
    try:
        stdout, stderr = await asyncio.wait_for(asyncio.shield(talk), timeout)
    except TimeoutError:
        proc.kill()
        await stop_tasks([talk])
        await proc.wait()
        raise ProfileProblem(
            REASON_CREDENTIALS_FAILED,
            f"credentials plugin of provider {provider.name!r} did not answer in {timeout:g}s",
        ) from None
    if proc.returncode != 0:
        said = stderr.decode(errors="replace").strip()[:STDERR_SHOWN]
        raise ProfileProblem(
            REASON_CREDENTIALS_FAILED,
            f"credentials plugin of provider {provider.name!r} exited with {proc.returncode}"
            + (f": {said}" if said else ""),
        )
    return parse_credential(stdout, provider.api_version)
