# OVMS's CLIP demo preprocessing (openvinotoolkit/model_server, demos/python_demos/
# clip_image_classification/servable/preprocess.py, Apache-2.0), changed only where it needs the
# real model: TinyClipProcessor (beside this script) instead of CLIPProcessor.from_pretrained,
# which returns numpy arrays rather than torch tensors (so no `.numpy()`).

from io import BytesIO

import numpy as np
from PIL import Image
from tiny_clip import TinyClipProcessor
from tritonclient.utils import deserialize_bytes_tensor

from pyovms import Tensor


class OvmsPythonModel:
    def initialize(self, kwargs: dict):
        self.processor = TinyClipProcessor()

    def execute(self, inputs: list):
        image = Image.open(BytesIO(deserialize_bytes_tensor(bytes(inputs[0]))[0]))
        input_labels = deserialize_bytes_tensor(bytes(inputs[1]))[0].decode()
        input_labels_split = input_labels.split(",")
        text_descriptions = [f"This is a photo of a {label}" for label in input_labels_split]

        model_inputs = self.processor(
            text=text_descriptions, images=[image], return_tensors="pt", padding=True
        )

        # dtype=np.dtype("q"), as in OVMS's demo (there, np.int64 would become INT32)
        input_ids = np.array(model_inputs["input_ids"], dtype=np.dtype("q"))
        attention_mask = np.array(model_inputs["attention_mask"], dtype=np.dtype("q"))

        input_ids_py = Tensor("input_ids_py", input_ids)
        attention_mask_py = Tensor("attention_mask_py", attention_mask)
        pixel_values_py = Tensor("pixel_values_py", model_inputs["pixel_values"])

        return [input_ids_py, attention_mask_py, pixel_values_py]
