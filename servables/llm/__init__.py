"""LLM serving pieces: chat templates and incremental detokenization."""
