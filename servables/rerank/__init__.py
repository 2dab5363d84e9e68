"""Cohere-style rerank: request/response, pair layout and the batched rerank servable."""
