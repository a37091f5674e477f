"""Engines for gateway tests without Ray: `LocalEngine`, the `EngineClient` contract over an
in-process `engines.replica.deployment.EngineDeployment` (what `HandleClient` is over a Ray handle), and
`GoneEngine`, an engine whose replica is gone (every call fails as Ray fails calls to a dead
deployment), so the gateway's failover and health paths run in seconds; `answers_from`, the real
HTTP routes' answers from a Gateway built over them."""

from __future__ import annotations

import asyncio

import httpx

from ray.serve._private.common import DeploymentID
from ray.serve.exceptions import DeploymentUnavailableError


class LocalStream:
    """An EngineStream over the deployment's async generator."""

    def __init__(self, items):
        self.items = items

    def __aiter__(self):
        return self

    async def __anext__(self):
        return await self.items.__anext__()

    def cancel(self) -> None:
        if self.items.ag_running:  # closed where it stands once the iteration in flight ends
            return
        asyncio.ensure_future(self.items.aclose())


class LocalEngine:
    """An EngineClient (router.decision.engine_client) over an in-process EngineDeployment."""

    def __init__(self, deployment):
        self.deployment = deployment

    async def generate(self, request):
        return await self.deployment.generate(request)

    def stream(self, request):
        return LocalStream(self.deployment.stream(request))

    async def agreement(self, request, answer_ids):
        return await self.deployment.agreement(request, answer_ids)

    async def load(self):
        return await self.deployment.load()

    async def info(self):
        return self.deployment.info()

    async def cost_profile(self):
        return self.deployment.cost_profile()


class GoneEngine:
    """An EngineClient whose deployment has no live replica: every call raises what Ray raises then."""

    def __init__(self, name: str = "BlockEngine"):
        self.error = DeploymentUnavailableError(DeploymentID(name=name, app_name="tandem"))

    async def _gone(self, *args):
        raise self.error

    generate = agreement = load = info = cost_profile = _gone

    def stream(self, request):
        raise self.error


async def answers_from(gw, requests: list[tuple[str, dict]]) -> list[httpx.Response]:
    """The real FastAPI app's answers (router.gateway.ingress, in process) to `requests` ((path, json
    body) pairs, one after another) from the Gateway `gw`; its routing view's poller is stopped after."""
    from router.gateway.ingress import api
    from router.gateway.orchestration import replica_gateway

    api.dependency_overrides[replica_gateway] = lambda: gw
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://gateway", timeout=60.0) as client:
            return [await client.post(path, json=body) for path, body in requests]
    finally:
        api.dependency_overrides.pop(replica_gateway, None)
        # asyncio.wait_for (3.11) swallows a cancel that lands as its inner call finishes, and a
        # gone engine's calls finish at once: cancel until the poller has stopped
        while not gw.view._poller.done():
            gw.view._poller.cancel()
            await asyncio.sleep(0.01)
