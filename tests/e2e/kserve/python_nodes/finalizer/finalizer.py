# finalize, called when the graph is unloaded, leaves a file beside the script.
from pathlib import Path

from pyovms import Tensor


class OvmsPythonModel:
    def initialize(self, kwargs):
        self.marker = Path(kwargs["base_path"]) / "finalized.txt"
        self.node_name = kwargs["node_name"]

    def execute(self, inputs):
        return [Tensor("out", bytes(inputs[0]))]

    def finalize(self):
        self.marker.write_text(self.node_name)
