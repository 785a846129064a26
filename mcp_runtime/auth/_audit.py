"""Audit of refused access: a structured log event, a counter by reason, a ledger entry.

Owns recording each refusal (401, 403, a permission denied to a tool, a dashboard sign-in
refused): the `auth.refused` log event with the reason and whatever identifies the caller
(principal, tenant, issuer, subject, token id, tool, path), the counter
`mcp_runtime_access_refusals_total{reason}`, and for an authenticated principal an append-only
ledger entry `access.refused` in its tenant (written in the background: a refusal never waits
for the durable store). Never records a token, nor any part of one. Must not decide anything.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client import CollectorRegistry, Counter

from mcp_runtime.auth._principal import Principal
from mcp_runtime.auth._refusals import RefusalReason
from runtime_core.storage import LedgerEntry

log = logging.getLogger("mcp_runtime.auth")

ACCESS_REFUSED_EVENT = "access.refused"
LedgerAppend = Callable[[list[LedgerEntry]], Awaitable[None]]

_counters: WeakKeyDictionary[CollectorRegistry, Counter] = WeakKeyDictionary()


def refusal_counter(registry: CollectorRegistry) -> Counter:
    """`mcp_runtime_access_refusals_total{reason}` of `registry` (one per registry)."""
    counter = _counters.get(registry)
    if counter is None:
        counter = _counters[registry] = Counter(
            "mcp_runtime_access_refusals",
            "Requests and calls refused by authentication or authorization, by reason.",
            ["reason"],
            registry=registry,
        )
    return counter


class AccessAudit:
    def __init__(self, registry: CollectorRegistry | None = None, ledger: LedgerAppend | None = None) -> None:
        self._counter = refusal_counter(registry) if registry is not None else None
        self._ledger = ledger
        self._writes: set[asyncio.Task[None]] = set()

    def refused(
        self,
        reason: RefusalReason,
        *,
        principal: Principal | None = None,
        tool: str | None = None,
        status: int | None = None,
        path: str | None = None,
        detail: str = "",
    ) -> None:
        fields = _fields(reason, principal, tool, status, path, detail)
        # The fields ride along as `extra` (structured handlers) and in the text (plain handlers).
        log.warning("auth.refused %s", json.dumps(fields, sort_keys=True), extra=fields)
        if self._counter is not None:
            self._counter.labels(reason=reason.value).inc()
        if principal is not None and self._ledger is not None:
            entry = LedgerEntry(tenant_id=principal.tenant_id, event=ACCESS_REFUSED_EVENT, attributes=fields)
            task = asyncio.get_running_loop().create_task(self._append(entry))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def _append(self, entry: LedgerEntry) -> None:
        assert self._ledger is not None
        try:
            await self._ledger([entry])
        except Exception as exc:  # the refusal stands; only its ledger copy is lost
            log.warning("auth.refusal_not_recorded", extra={"error_type": type(exc).__name__})

    async def flush(self) -> None:
        """Wait for the ledger entries of refusals made so far."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)


def _fields(
    reason: RefusalReason,
    principal: Principal | None,
    tool: str | None,
    status: int | None,
    path: str | None,
    detail: str,
) -> dict[str, Any]:
    fields: dict[str, Any] = {"reason": reason.value}
    if principal is not None:
        auth = principal.authentication
        fields.update(principal=principal.name, user_id=principal.user_id, tenant_id=principal.tenant_id)
        if auth is not None:
            fields["auth_method"] = auth.method.value
            fields.update(
                {
                    key: value
                    for key, value in (
                        ("issuer", auth.issuer),
                        ("subject", auth.subject),
                        ("token_id", auth.token_id),
                        ("client_id", auth.client_id),
                    )
                    if value is not None
                }
            )
    optional = {"tool": tool, "status": status, "path": path, "detail": detail}
    fields.update({key: value for key, value in optional.items() if value})
    return fields
