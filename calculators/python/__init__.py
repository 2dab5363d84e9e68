"""OVMS's Python nodes: PythonExecutorCalculator and the converter to and from OpenVINO tensors."""
