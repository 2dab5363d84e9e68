"""What the encoder calculators (embeddings, rerank) share: the node's shape and its options."""
