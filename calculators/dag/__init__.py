"""The nodes that carry OVMS's DAG demultiplexing into a graph: split into branches, gather back."""
