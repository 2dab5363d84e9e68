"""EmbeddingsCalculatorOV: OpenAI embeddings over an embeddings servable (OVMS graph)."""
