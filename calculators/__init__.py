"""Built-in calculators: core/ for composing graphs, llm/ for OpenAI-compatible text generation."""
