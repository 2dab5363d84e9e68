"""Media in requests: where client images may come from, and how they become engine tensors."""
