# OVMS's quickstart servable: a string in, the same string in capitals out.
from pyovms import Tensor


class OvmsPythonModel:
    def execute(self, inputs: list):
        text = bytes(inputs[0]).decode()
        return [Tensor("uppercase", text.upper().encode())]
