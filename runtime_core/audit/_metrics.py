"""RuntimeMetrics: the runtime's Prometheus counters and histograms.

Owns one dedicated `CollectorRegistry` per instance (never the process-global default, so
tests and several runtimes in one process stay isolated) and the metric names. Implements
`runtime_core.retention.RetentionMetrics`. Must not decide anything from what it counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

_SIZE_BUCKETS = (1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
# Steps run from microseconds (merge) to minutes (LLM calls, human-free tools).
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# Executions last from milliseconds to hours: a human step waits that long for its answer.
EXECUTION_BUCKETS = (
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
    7200,
    14400,
    28800,
    86400,
)


class RuntimeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, namespace: str = "mcprt") -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r, ns = self.registry, namespace
        self.executions_started = Counter(
            "executions_started", "Executions created.", namespace=ns, registry=r
        )
        self.executions_finished = Counter(
            "executions_finished", "Executions finalized, by status.", ["status"], namespace=ns, registry=r
        )
        self.execution_seconds = Histogram(
            "execution_duration_seconds",
            "Created to finalized (waits for input and pauses included), by final status.",
            ["status"],
            buckets=EXECUTION_BUCKETS,
            namespace=ns,
            registry=r,
        )
        self.steps = Counter("steps", "Step attempts by outcome.", ["outcome"], namespace=ns, registry=r)
        self.step_seconds = Histogram(
            "step_duration_seconds",
            "Claim to outcome of one step attempt, by step key and outcome.",
            ["step_key", "outcome"],
            buckets=_STEP_BUCKETS,
            namespace=ns,
            registry=r,
        )
        self.retries = Counter(
            "step_retries", "Retries scheduled, by step key.", ["step_key"], namespace=ns, registry=r
        )
        self.retries_exhausted = Counter(
            "step_retries_exhausted",
            "Steps failed for good after using every allowed retry, by step key.",
            ["step_key"],
            namespace=ns,
            registry=r,
        )
        self.recoveries = Counter(
            "recoveries",
            "Recovered stale steps and recovery actions, by kind.",
            ["kind"],
            namespace=ns,
            registry=r,
        )
        self.lease_denials = Counter(
            "lease_denials", "Concurrency lease denials, by scope.", ["scope"], namespace=ns, registry=r
        )
        self.retention_passes = Counter(
            "retention_passes",
            "Retention passes, by strategy and trigger.",
            ["strategy", "trigger"],
            namespace=ns,
            registry=r,
        )
        self.retention_seconds = Histogram(
            "retention_decision_seconds", "Duration of one retention pass.", namespace=ns, registry=r
        )
        self.retention_actions = Counter(
            "retention_actions", "Results compacted or evicted.", ["action"], namespace=ns, registry=r
        )
        self.resolver_hits = Counter(
            "resolver_hits", "Results resolved, by layer.", ["layer"], namespace=ns, registry=r
        )
        self.resolver_failures = Counter(
            "resolver_failures",
            "Results that could not be resolved, by reason.",
            ["reason"],
            namespace=ns,
            registry=r,
        )
        self.resolver_seconds = Histogram(
            "resolver_latency_seconds", "Time to resolve one step's inputs.", namespace=ns, registry=r
        )
        self.payload_bytes = Histogram(
            "payload_bytes",
            "Sizes of externalized payloads.",
            buckets=_SIZE_BUCKETS,
            namespace=ns,
            registry=r,
        )
        self.snapshots_written = Counter("snapshots_written", "Terminal snapshots.", namespace=ns, registry=r)
        self.llm_tokens = Counter(
            "llm_tokens",
            "LLM tokens consumed by step attempts, by provider name, model and kind (input, output).",
            ["provider", "model", "kind"],
            namespace=ns,
            registry=r,
        )

        self.webhook_deliveries = Counter(
            "webhook_deliveries",
            "Webhook delivery attempts settled, by outcome (delivered, retrying, dead_lettered).",
            ["outcome"],
            namespace=ns,
            registry=r,
        )

    def render(self) -> bytes:
        """The Prometheus text exposition of this registry."""
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """A sample's current value (0.0 when never observed), e.g. `mcprt_steps_total`."""
        return self.registry.get_sample_value(name, labels or {}) or 0.0

    # RetentionMetrics

    def resolver_hit(self, layer: str) -> None:
        self.resolver_hits.labels(layer=layer).inc()

    def resolver_failure(self, reason: str) -> None:
        self.resolver_failures.labels(reason=reason).inc()

    def resolver_latency(self, seconds: float) -> None:
        self.resolver_seconds.observe(seconds)

    def payload_externalized(self, size: int) -> None:
        self.payload_bytes.observe(size)

    def retention_pass(self, strategy: str, trigger: str, seconds: float) -> None:
        self.retention_passes.labels(strategy=strategy, trigger=trigger).inc()
        self.retention_seconds.observe(seconds)

    def retention_action(self, action: str, count: int) -> None:
        if count:
            self.retention_actions.labels(action=action).inc(count)

    # Providers

    def tokens_used(self, usage: dict[str, object]) -> None:
        """Count one attempt's `usage` record (`provider`, `model`, `inputTokens`, `outputTokens`)."""
        labels = {"provider": str(usage.get("provider")), "model": str(usage.get("model"))}
        for kind, field in (("input", "inputTokens"), ("output", "outputTokens")):
            count = usage.get(field)
            if isinstance(count, int) and count > 0:
                self.llm_tokens.labels(kind=kind, **labels).inc(count)

    # Webhooks

    def webhook_settled(self, outcome: str) -> None:
        self.webhook_deliveries.labels(outcome=outcome).inc()

    # Concurrency and recovery

    def lease_denied(self, scope: str) -> None:
        self.lease_denials.labels(scope=scope).inc()

    def recovery_recorded(self, kind: str) -> None:
        self.recoveries.labels(kind=kind).inc()
