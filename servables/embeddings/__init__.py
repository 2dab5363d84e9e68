"""OpenAI embeddings: request/response and the batched embeddings servable."""
