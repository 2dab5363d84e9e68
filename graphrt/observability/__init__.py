"""Watching the server: Prometheus collectors, request ids, OpenTelemetry tracing, and the observers
each served graph's runs report to."""
