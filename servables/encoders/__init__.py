"""Encoder models (embeddings, cross-encoders): model files, tokenizer, model, dynamic batching
and the servable lifecycle they share."""
