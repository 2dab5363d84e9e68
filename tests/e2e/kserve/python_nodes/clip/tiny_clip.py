"""A stand-in for transformers' CLIPProcessor, small enough for tests: the same call and outputs
(input_ids and attention_mask per text, padded; pixel_values per image), made from the text's
bytes and an 8x8 thumbnail. The tiny model the tests build takes exactly these inputs."""

import numpy as np

VOCAB = 64
IMAGE_SIZE = 8


class TinyClipProcessor:
    def __call__(self, text, images, return_tensors="np", padding=True):
        tokens = [[1 + byte % (VOCAB - 1) for byte in line.encode()] for line in text]
        length = max(len(line) for line in tokens)
        input_ids = np.zeros((len(tokens), length), np.int64)
        attention_mask = np.zeros((len(tokens), length), np.int64)
        for row, line in enumerate(tokens):
            input_ids[row, : len(line)] = line
            attention_mask[row, : len(line)] = 1
        pixels = [
            np.asarray(image.convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE)), np.float32)
            for image in images
        ]
        pixel_values = (np.stack(pixels).transpose(0, 3, 1, 2) / 255.0 - 0.5) / 0.5
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "pixel_values": pixel_values.astype(np.float32),
        }
