"""The application layer: CLI, model repository, HTTP and gRPC frontends, metrics.

Everything here may import every other package; nothing imports this package.
"""
