"""Core calculators users compose graphs from; each module holds one calculator."""
