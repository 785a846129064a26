"""An MCP server with side effects, for `mcp.tool` steps: the examples, the docs and the tests use it.

Run it over streamable HTTP (`--transport http --port 8931`, endpoint `/mcp`) or stdio (the
runtime starts it itself). Every call is appended to `--effects-file` (JSON lines, shared by
every process of the server, so a stdio server started and stopped with a runtime instance
still counts) with the operation id the runtime sent in `_meta` (`mcp-runtime/operationId`).

Tools:
- `create_ticket(title, priority)`: files a ticket; idempotent by operation id (a repeat of
  an id answers the first ticket without a new effect);
- `send_email(to, subject)`: sends a mail; NOT idempotent (every call is an effect);
- both take `hold_until`: after the effect, wait until that file exists (a slow call, so a
  test can kill the caller mid-call);
- `ticket_status(operation_id)`: whether an operation filed a ticket, and which (reconcile);
- `reject(reason, retryable)`: answers `isError` (retryable: a transient error);
- `lookup(city)`: read-only, structured output.
With `--bearer-token-env NAME` the HTTP endpoint refuses requests without that bearer token;
with `--oauth-issuer URL --jwks-url URL` it is an OAuth 2.1 resource server (RFC 9728 metadata,
access tokens checked against the issuer's keys, audience = its own URL, scope `tickets`), so a
client with OAuth client credentials gets its token from that authorization server.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import jwt
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

OPERATION_META_KEY = "mcp-runtime/operationId"
EFFECTS_FILE_ENV = "SIDE_EFFECTS_FILE"
_HOLD_POLL_S = 0.05


class Ticket(BaseModel):
    ticket: str
    title: str
    priority: int
    operation_id: str | None = None


class Email(BaseModel):
    delivered: bool
    to: str
    message: int


class TicketStatus(BaseModel):
    found: bool
    result: Ticket | None = None


class Weather(BaseModel):
    city: str
    temp_c: float


class EffectsLog:
    """Every call as one JSON line `{tool, operation_id, effect, result, at}`, written under a
    file lock so several server processes share one count."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("r", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            return [json.loads(line) for line in handle if line.strip()]

    def apply(
        self, tool: str, operation_id: str | None, make: Callable[[int], dict[str, Any]], *, dedupe: bool
    ) -> dict[str, Any]:
        """The call's result: a new effect (`make(n)`, n = this tool's effect count), or, with
        `dedupe`, the result an earlier effect of the same operation id made (no new effect)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            lines = [json.loads(line) for line in handle if line.strip()]
            done = [e for e in lines if e["tool"] == tool and e["effect"]]
            earlier = [e for e in done if dedupe and operation_id and e["operation_id"] == operation_id]
            result = earlier[0]["result"] if earlier else make(len(done) + 1)
            entry = {"tool": tool, "operation_id": operation_id, "effect": not earlier, "result": result}
            handle.write(json.dumps({**entry, "at": time.time()}) + "\n")
        return result


def _wait_for_file(path: str) -> None:
    while not Path(path).exists():
        time.sleep(_HOLD_POLL_S)


async def hold(path: str | None) -> None:
    """A slow call: wait until `path` exists (the test creates it, or kills the caller first)."""
    if path:
        await anyio.to_thread.run_sync(_wait_for_file, path, abandon_on_cancel=True)


def operation_id(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    value = meta.get(OPERATION_META_KEY) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


class JwksVerifier:
    """Access tokens of `issuer`, signed with a key of its JWKS, for this server (`audience`)."""

    def __init__(self, issuer: str, jwks_url: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self.keys = jwt.PyJWKClient(jwks_url)

    def _claims(self, token: str) -> dict[str, Any]:
        key = self.keys.get_signing_key_from_jwt(token).key
        options = {"require": ["exp", "iss", "aud"]}
        return jwt.decode(
            token,
            key,
            algorithms=["RS256", "ES256"],
            audience=self.audience,
            issuer=self.issuer,
            options=options,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = await anyio.to_thread.run_sync(self._claims, token)
        except jwt.PyJWTError:
            return None
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or ""),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=claims.get("exp"),
            resource=self.audience,
            subject=claims.get("sub"),
        )


def build_server(effects: EffectsLog, verifier: JwksVerifier | None = None) -> MCPServer:
    auth = None
    if verifier is not None:
        auth = AuthSettings(
            issuer_url=verifier.issuer,
            resource_server_url=verifier.audience,
            required_scopes=["tickets"],
            validate_token_resource=True,
        )
    server = MCPServer("side-effects", token_verifier=verifier, auth=auth)

    @server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=False))
    async def create_ticket(
        ctx: Context,
        title: str = Field(min_length=1, max_length=200),
        priority: int = Field(default=3, ge=1, le=5),
        hold_until: str | None = None,
    ) -> Ticket:
        """File a ticket (idempotent by the caller's operation id)."""
        op = operation_id(ctx)

        def new_ticket(n: int) -> dict[str, Any]:
            return Ticket(ticket=f"T-{n}", title=title, priority=priority, operation_id=op).model_dump()

        ticket = effects.apply("create_ticket", op, new_ticket, dedupe=True)
        await hold(hold_until)
        return Ticket(**ticket)

    @server.tool(annotations=ToolAnnotations(idempotentHint=False, destructiveHint=False))
    async def send_email(ctx: Context, to: str, subject: str, hold_until: str | None = None) -> Email:
        """Send a mail (not idempotent: every call sends one)."""

        def mail(n: int) -> dict[str, Any]:
            return {"delivered": True, "to": to, "message": n}

        sent = effects.apply("send_email", operation_id(ctx), mail, dedupe=False)
        await hold(hold_until)
        return Email(**sent)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def ticket_status(operation_id: str) -> TicketStatus:
        """Whether an operation id filed a ticket (the status operation for reconcile)."""
        for entry in effects.entries():
            if entry["tool"] == "create_ticket" and entry["effect"] and entry["operation_id"] == operation_id:
                return TicketStatus(found=True, result=Ticket(**entry["result"]))
        return TicketStatus(found=False)

    @server.tool()
    async def reject(reason: str, retryable: bool = False) -> CallToolResult:
        """Always answers isError (a tool-level failure), retryable or not."""
        return CallToolResult(
            content=[TextContent(type="text", text=f"rejected: {reason}")],
            structured_content={"reason": reason, "retryable": retryable},
            is_error=True,
        )

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def lookup(city: str) -> Weather:
        """Read-only: the weather of a city (structured output)."""
        return Weather(city=city, temp_c=float(len(city)))

    return server


def bearer_only(app: Any, token: str) -> Any:
    """`app` refusing every HTTP request that lacks `Authorization: Bearer <token>` (401)."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                start = {"type": "http.response.start", "status": 401, "headers": []}
                await send(start)
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8931)
    parser.add_argument("--effects-file", default=os.environ.get(EFFECTS_FILE_ENV, "side-effects.jsonl"))
    parser.add_argument("--bearer-token-env", help="require this variable's value as the bearer token")
    parser.add_argument("--oauth-issuer", help="accept access tokens of this OAuth issuer (with --jwks-url)")
    parser.add_argument("--jwks-url", help="the issuer's JWKS (the keys its tokens are signed with)")
    args = parser.parse_args()
    verifier = None
    if args.oauth_issuer:
        verifier = JwksVerifier(args.oauth_issuer, args.jwks_url, f"http://127.0.0.1:{args.port}/mcp")
    server = build_server(EffectsLog(Path(args.effects_file)), verifier)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp")
    if args.bearer_token_env:
        app = bearer_only(app, os.environ[args.bearer_token_env])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
