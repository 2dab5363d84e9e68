"""The KServe v2 protocol: one data plane (dataplane.py) behind gRPC (grpc_server.py) and REST
(rest.py), serving repository models and graphs."""
