# OVMS's CLIP demo postprocessing (openvinotoolkit/model_server, demos/python_demos/
# clip_image_classification/servable/postprocess.py, Apache-2.0), changed only in its softmax:
# numpy's instead of scipy.special.softmax (scipy is not installed here).

import numpy as np
from tritonclient.utils import deserialize_bytes_tensor

from pyovms import Tensor


def softmax(values, axis):
    exponents = np.exp(values - values.max(axis=axis, keepdims=True))
    return exponents / exponents.sum(axis=axis, keepdims=True)


class OvmsPythonModel:
    def initialize(self, kwargs: dict):
        pass

    def execute(self, inputs: list):
        input_labels_bytes = deserialize_bytes_tensor(bytes(inputs[0]))[0].decode()
        input_labels = input_labels_bytes.split(",")
        input_labels = np.array(input_labels)

        ov_logits_per_image = np.array(inputs[1], copy=False)
        probs = softmax(ov_logits_per_image, axis=1)[0]

        max_prob = probs.argmax(axis=0)
        max_label = input_labels[max_prob]
        max_label = str(max_label)

        return [Tensor("output_label", max_label.encode())]
