"""OVMS's model calculators: a session on a model from the server's repository, and inference."""
