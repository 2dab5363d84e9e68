# The input back under the output's name, datatype and shape; b"boom" makes execute raise.
from pyovms import Tensor


class OvmsPythonModel:
    def execute(self, inputs):
        data = inputs[0]
        if bytes(data) == b"boom":
            raise ValueError("the input said boom")
        return [Tensor("echoed", data, shape=data.shape, datatype=data.datatype)]
