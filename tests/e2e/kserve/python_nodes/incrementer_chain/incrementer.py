# One script for every node of the chain: the output name comes from initialize's kwargs.
import numpy as np

from pyovms import Tensor


class OvmsPythonModel:
    def initialize(self, kwargs):
        self.output_name = kwargs["output_names"][0]

    def execute(self, inputs):
        return [Tensor(self.output_name, np.array(inputs[0]) + 1)]
