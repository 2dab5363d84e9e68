# Generative mode: one output per character of the input, that character in capitals.
from pyovms import Tensor


class OvmsPythonModel:
    def initialize(self, kwargs):
        self.outputs = [name for name in kwargs["output_names"] if name != "loopback"]

    def execute(self, inputs):
        text = bytes(inputs[0]).decode()
        for i in range(len(text)):
            step = (text[:i] + text[i].upper() + text[i + 1 :]).encode()
            yield [Tensor(name, step) for name in self.outputs]
