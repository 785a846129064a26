"""Benchmarks: throughput, latency and cost of the runtime against baselines measured in the same run."""
