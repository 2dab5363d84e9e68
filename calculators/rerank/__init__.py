"""RerankCalculatorOV: Cohere-style rerank over a cross-encoder servable (OVMS graph)."""
