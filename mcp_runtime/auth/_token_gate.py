"""A bearer token checked against configured sha256 digests, in front of one HTTP endpoint.

Owns guarding an endpoint that is not an MCP tool (Prometheus `/metrics`, which exposes tenant
ids when tenant labels are on) with a token whose digest is configured: constant-time
comparison, 401 with `WWW-Authenticate: Bearer realm="…"` otherwise, the refusal audited.
Must never log or keep the presented token.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mcp_runtime.auth._audit import AccessAudit
from mcp_runtime.auth._refusals import RefusalReason
from mcp_runtime.auth._static_tokens import hash_token

Endpoint = Callable[[Request], Awaitable[Response]]


class TokenGate:
    def __init__(
        self, digests: Sequence[str], audit: AccessAudit | None = None, realm: str = "metrics"
    ) -> None:
        self._digests = tuple(digests)
        self._audit = audit or AccessAudit()
        self._realm = realm

    def admits(self, request: Request) -> RefusalReason | None:
        """None when the request carries a configured token, else why not."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return RefusalReason.MISSING_TOKEN
        presented = hash_token(token.strip())
        matched = False
        for digest in self._digests:  # every digest is compared: no early exit
            matched |= hmac.compare_digest(presented, digest)
        return None if matched else RefusalReason.UNKNOWN_TOKEN

    def guard(self, endpoint: Endpoint) -> Endpoint:
        async def guarded(request: Request) -> Response:
            refusal = self.admits(request)
            if refusal is None:
                return await endpoint(request)
            self._audit.refused(refusal, status=401, path=request.url.path)
            return PlainTextResponse(
                f"[unauthenticated] {request.url.path} needs 'Authorization: Bearer <token>' with a "
                "configured metrics token.\n",
                status_code=401,
                headers={"WWW-Authenticate": f'Bearer realm="{self._realm}"'},
            )

        return guarded
