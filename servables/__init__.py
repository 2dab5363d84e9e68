"""Engines behind graph side packets, and the OpenAI semantics around them.

Usable without a graph (benchmarks drive them directly): nothing here imports graphruntime or
calculators.
"""
