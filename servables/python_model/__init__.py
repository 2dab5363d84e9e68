"""OVMS's Python nodes without a graph: `pyovms.Tensor` and the host of a handler script."""
