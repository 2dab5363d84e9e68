"""Tiny classic models in every format OpenVINO's frontends read, written offline for tests.

Each computes `y = x + OFFSETS` on an NHWC float input `x` of shape [1, 4, 4, 3] (the offsets
broadcast over the channels), so one check fits all: OpenVINO IR and ONNX from their own Python
APIs (openvino's opset, onnx's helper), TensorFlow Lite from the `tflite` package's flatbuffer
builders, and TensorFlow's frozen GraphDef and SavedModel and PaddlePaddle's program from their
protobuf messages, declared here with the field numbers of TensorFlow's and Paddle's .proto
files (tensorflow and paddlepaddle are wheels of hundreds of MB; OpenVINO's frontends read the
bytes, not the Python classes).

`image_model` is the image classifier of the KServe tests: NCHW [1, 3, H, W] in, the input
scaled per channel out, so the output shows every pixel the preprocessing produced.
`string_model` takes a string tensor, as a tokenizer does: BYTES in, the same strings out.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

SHAPE = (1, 4, 4, 3)
OFFSETS = np.array([1.0, 2.0, 3.0], np.float32)
INPUT, OUTPUT = "x", "y"
CHANNEL_FACTORS = np.array([1.0, 2.0, 3.0], np.float32)


def expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """What every format's model computes."""
    return np.asarray(x + OFFSETS, np.float32)


def _named(output: Any, name: str) -> Any:
    output.get_tensor().set_names({name})
    return output


def save_ir(path: Path) -> Path:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter(list(SHAPE), ov.Type.f32, name=INPUT)
    _named(x.output(0), INPUT)
    y = ops.add(x, ops.constant(OFFSETS))
    _named(y.output(0), OUTPUT)
    path.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model([ops.result(y)], [x], "add"), path / "model.xml")
    return path / "model.xml"


def image_model(path: Path, height: int = 8, width: int = 8) -> Path:
    """NCHW [1, 3, height, width] FP32 `data` -> `prob`, each channel times CHANNEL_FACTORS."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, height, width], ov.Type.f32, name="data")
    _named(x.output(0), "data")
    y = ops.multiply(x, ops.constant(CHANNEL_FACTORS.reshape(1, 3, 1, 1)))
    _named(y.output(0), "prob")
    path.mkdir(parents=True, exist_ok=True)
    ov.save_model(
        ov.Model([ops.result(y)], [x], "image"), path / "model.xml", compress_to_fp16=False
    )
    return path / "model.xml"


def string_model(path: Path) -> Path:
    """String `text` [-1] -> `out`, the same strings reshaped to [-1, 1]."""
    import openvino as ov
    import openvino.opset13 as ops

    text = ops.parameter([-1], ov.Type.string, name="text")
    _named(text.output(0), "text")
    out = ops.reshape(text, ops.constant(np.array([-1, 1], np.int64)), special_zero=False)
    _named(out.output(0), "out")
    path.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model([ops.result(out)], [text], "strings"), path / "model.xml")
    return path / "model.xml"


def save_onnx(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Add", [INPUT, "offsets"], [OUTPUT])],
        "add",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, list(SHAPE))],
        [numpy_helper.from_array(OFFSETS, "offsets")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path / "model.onnx")
    return path / "model.onnx"


def save_tflite(path: Path) -> Path:
    """One ADD operator over the input and a constant tensor, in TFLite's flatbuffer schema."""
    import importlib

    import flatbuffers

    # The schema's modules (the package's __init__ shadows them with their classes).
    (AddOptions, Buffer, BuiltinOperator, BuiltinOptions, Model) = (
        importlib.import_module(f"tflite.{name}")
        for name in ("AddOptions", "Buffer", "BuiltinOperator", "BuiltinOptions", "Model")
    )
    (Operator, OperatorCode, SubGraph, Tensor, TensorType) = (
        importlib.import_module(f"tflite.{name}")
        for name in ("Operator", "OperatorCode", "SubGraph", "Tensor", "TensorType")
    )
    builder = flatbuffers.Builder(1024)

    def vector(start: Any, values: list[int], prepend: str = "PrependInt32") -> int:
        start(builder, len(values))
        for value in reversed(values):
            getattr(builder, prepend)(value)
        return int(builder.EndVector())

    def offsets_vector(values: list[int]) -> int:
        builder.StartVector(4, len(values), 4)
        for value in reversed(values):
            builder.PrependUOffsetTRelative(value)
        return int(builder.EndVector())

    # Buffers: 0 is the empty sentinel; 1 holds the constant's bytes.
    data = builder.CreateNumpyVector(np.frombuffer(OFFSETS.tobytes(), np.uint8))
    Buffer.Start(builder)
    empty = Buffer.End(builder)
    Buffer.Start(builder)
    Buffer.AddData(builder, data)
    constant = Buffer.End(builder)
    buffers = offsets_vector([empty, constant])

    def tensor(name: str, shape: list[int], buffer: int) -> int:
        text = builder.CreateString(name)
        dims = vector(Tensor.StartShapeVector, shape)
        Tensor.Start(builder)
        Tensor.AddShape(builder, dims)
        Tensor.AddType(builder, TensorType.TensorType.FLOAT32)
        Tensor.AddBuffer(builder, buffer)
        Tensor.AddName(builder, text)
        return int(Tensor.End(builder))

    tensors = offsets_vector(
        [tensor(INPUT, list(SHAPE), 0), tensor("offsets", [3], 1), tensor(OUTPUT, list(SHAPE), 0)]
    )
    AddOptions.Start(builder)
    options = AddOptions.End(builder)
    op_inputs = vector(Operator.StartInputsVector, [0, 1])
    op_outputs = vector(Operator.StartOutputsVector, [2])
    Operator.Start(builder)
    Operator.AddOpcodeIndex(builder, 0)
    Operator.AddInputs(builder, op_inputs)
    Operator.AddOutputs(builder, op_outputs)
    Operator.AddBuiltinOptionsType(builder, BuiltinOptions.BuiltinOptions.AddOptions)
    Operator.AddBuiltinOptions(builder, options)
    operators = offsets_vector([Operator.End(builder)])
    graph_inputs = vector(SubGraph.StartInputsVector, [0])
    graph_outputs = vector(SubGraph.StartOutputsVector, [2])
    SubGraph.Start(builder)
    SubGraph.AddTensors(builder, tensors)
    SubGraph.AddInputs(builder, graph_inputs)
    SubGraph.AddOutputs(builder, graph_outputs)
    SubGraph.AddOperators(builder, operators)
    subgraphs = offsets_vector([SubGraph.End(builder)])
    OperatorCode.Start(builder)
    OperatorCode.AddDeprecatedBuiltinCode(builder, BuiltinOperator.BuiltinOperator.ADD)
    OperatorCode.AddBuiltinCode(builder, BuiltinOperator.BuiltinOperator.ADD)
    OperatorCode.AddVersion(builder, 1)
    codes = offsets_vector([OperatorCode.End(builder)])
    Model.Start(builder)
    Model.AddVersion(builder, 3)
    Model.AddOperatorCodes(builder, codes)
    Model.AddSubgraphs(builder, subgraphs)
    Model.AddBuffers(builder, buffers)
    builder.Finish(Model.End(builder), file_identifier=b"TFL3")
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.tflite").write_bytes(bytes(builder.Output()))
    return path / "model.tflite"


# ------------------------------------------------------------------------------ TensorFlow

# The messages of TensorFlow's graph.proto, node_def.proto, attr_value.proto, tensor.proto,
# tensor_shape.proto, meta_graph.proto and saved_model.proto that these models use, with
# TensorFlow's field numbers: (field name, number, type, label, message type).
Field = tuple[str, int, str, str, str]


def _map_entry(value_type: str) -> list[Field]:
    """The fields of a protobuf map<string, value_type>'s entry message."""
    return [("key", 1, "string", "optional", ""), ("value", 2, "message", "optional", value_type)]


_TF_MESSAGES: dict[str, list[Field]] = {
    "TensorShapeProto.Dim": [("size", 1, "int64", "optional", "")],
    "TensorShapeProto": [("dim", 2, "message", "repeated", "TensorShapeProto.Dim")],
    "TensorProto": [
        ("dtype", 1, "int32", "optional", ""),
        ("tensor_shape", 2, "message", "optional", "TensorShapeProto"),
        ("tensor_content", 4, "bytes", "optional", ""),
    ],
    "AttrValue": [
        ("type", 6, "int32", "optional", ""),
        ("shape", 7, "message", "optional", "TensorShapeProto"),
        ("tensor", 8, "message", "optional", "TensorProto"),
    ],
    "NodeDef.AttrEntry": _map_entry("AttrValue"),
    "NodeDef": [
        ("name", 1, "string", "optional", ""),
        ("op", 2, "string", "optional", ""),
        ("input", 3, "string", "repeated", ""),
        ("attr", 5, "message", "repeated", "NodeDef.AttrEntry"),
    ],
    "VersionDef": [("producer", 1, "int32", "optional", "")],
    "GraphDef": [
        ("node", 1, "message", "repeated", "NodeDef"),
        ("versions", 4, "message", "optional", "VersionDef"),
    ],
    "TensorInfo": [
        ("name", 1, "string", "optional", ""),
        ("dtype", 2, "int32", "optional", ""),
        ("tensor_shape", 3, "message", "optional", "TensorShapeProto"),
    ],
    "SignatureDef.InputsEntry": _map_entry("TensorInfo"),
    "SignatureDef.OutputsEntry": _map_entry("TensorInfo"),
    "SignatureDef": [
        ("inputs", 1, "message", "repeated", "SignatureDef.InputsEntry"),
        ("outputs", 2, "message", "repeated", "SignatureDef.OutputsEntry"),
        ("method_name", 3, "string", "optional", ""),
    ],
    "MetaInfoDef": [("tags", 4, "string", "repeated", "")],
    "MetaGraphDef.SignatureDefEntry": _map_entry("SignatureDef"),
    "MetaGraphDef": [
        ("meta_info_def", 1, "message", "optional", "MetaInfoDef"),
        ("graph_def", 2, "message", "optional", "GraphDef"),
        ("signature_def", 5, "message", "repeated", "MetaGraphDef.SignatureDefEntry"),
    ],
    "SavedModel": [
        ("saved_model_schema_version", 1, "int64", "optional", ""),
        ("meta_graphs", 2, "message", "repeated", "MetaGraphDef"),
    ],
}
DT_FLOAT = 1


def _message_classes(package: str, messages: dict[str, list[Field]]) -> dict[str, Any]:
    """Message classes for `messages` (full name -> fields), built from a descriptor: no .proto
    file, no generated code. Fields are proto2's, so a `required` one is written when set."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    kinds = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name=f"{package}_subset.proto", package=package)
    protos: dict[str, Any] = {}
    for full_name in sorted(messages, key=lambda name: name.count(".")):
        parent, _, name = full_name.rpartition(".")
        message = (protos[parent].nested_type if parent else file.message_type).add(name=name)
        if name.endswith("Entry"):
            message.options.map_entry = True
        for field_name, number, kind, label, type_name in messages[full_name]:
            field = message.field.add(
                name=field_name,
                number=number,
                type=getattr(kinds, f"TYPE_{kind.upper()}"),
                label=getattr(kinds, f"LABEL_{label.upper()}"),
            )
            if type_name:
                field.type_name = f".{package}.{type_name}"
        protos[full_name] = message
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name in messages
    }


def _tf_classes() -> dict[str, Any]:
    return _message_classes("tensorflow", _TF_MESSAGES)


def _graph_def(classes: dict[str, Any]) -> Any:
    graph = classes["GraphDef"]()
    graph.versions.producer = 1087
    x = graph.node.add(name=INPUT, op="Placeholder")
    x.attr["dtype"].type = DT_FLOAT
    for size in SHAPE:
        x.attr["shape"].shape.dim.add(size=size)
    offsets = graph.node.add(name="offsets", op="Const")
    offsets.attr["dtype"].type = DT_FLOAT
    offsets.attr["value"].tensor.dtype = DT_FLOAT
    offsets.attr["value"].tensor.tensor_shape.dim.add(size=3)
    offsets.attr["value"].tensor.tensor_content = OFFSETS.tobytes()
    add = graph.node.add(name="add", op="AddV2", input=[INPUT, "offsets"])
    add.attr["T"].type = DT_FLOAT
    y = graph.node.add(name=OUTPUT, op="Identity", input=["add"])
    y.attr["T"].type = DT_FLOAT
    return graph


def save_tf_frozen(path: Path) -> Path:
    """A frozen GraphDef (.pb): Placeholder x, AddV2 with a Const, Identity y."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.pb").write_bytes(_graph_def(_tf_classes()).SerializeToString())
    return path / "model.pb"


def save_tf_saved_model(path: Path) -> Path:
    """A SavedModel folder: saved_model.pb with the graph under the `serve` tag and the
    `serving_default` signature; the graph has no variables, so there is no variables/."""
    classes = _tf_classes()
    saved = classes["SavedModel"](saved_model_schema_version=1)
    meta = saved.meta_graphs.add()
    meta.meta_info_def.tags.append("serve")
    meta.graph_def.CopyFrom(_graph_def(classes))
    signature = meta.signature_def["serving_default"]
    signature.method_name = "tensorflow/serving/predict"
    for key, name in ((INPUT, f"{INPUT}:0"), (OUTPUT, f"{OUTPUT}:0")):
        info = (signature.inputs if key == INPUT else signature.outputs)[key]
        info.name, info.dtype = name, DT_FLOAT
        for size in SHAPE:
            info.tensor_shape.dim.add(size=size)
    path.mkdir(parents=True, exist_ok=True)
    (path / "saved_model.pb").write_bytes(saved.SerializeToString())
    return path / "saved_model.pb"


# ------------------------------------------------------------------------------ PaddlePaddle

# The messages of Paddle's framework.proto that a static program uses, with its field numbers.
_PADDLE_MESSAGES: dict[str, list[Field]] = {
    "VarType": [
        ("type", 1, "int32", "required", ""),
        ("lod_tensor", 3, "message", "optional", "VarType.LoDTensorDesc"),
    ],
    "VarType.TensorDesc": [
        ("data_type", 1, "int32", "required", ""),
        ("dims", 2, "int64", "repeated", ""),
    ],
    "VarType.LoDTensorDesc": [("tensor", 1, "message", "required", "VarType.TensorDesc")],
    "VarDesc": [
        ("name", 1, "string", "required", ""),
        ("type", 2, "message", "required", "VarType"),
        ("persistable", 3, "bool", "optional", ""),
    ],
    "OpDesc.Attr": [
        ("name", 1, "string", "required", ""),
        ("type", 2, "int32", "required", ""),
        ("i", 3, "int32", "optional", ""),
    ],
    "OpDesc.Var": [
        ("parameter", 1, "string", "required", ""),
        ("arguments", 2, "string", "repeated", ""),
    ],
    "OpDesc": [
        ("inputs", 1, "message", "repeated", "OpDesc.Var"),
        ("outputs", 2, "message", "repeated", "OpDesc.Var"),
        ("type", 3, "string", "required", ""),
        ("attrs", 4, "message", "repeated", "OpDesc.Attr"),
    ],
    "BlockDesc": [
        ("idx", 1, "int32", "required", ""),
        ("parent_idx", 2, "int32", "required", ""),
        ("vars", 3, "message", "repeated", "VarDesc"),
        ("ops", 4, "message", "repeated", "OpDesc"),
    ],
    "Version": [("version", 1, "int64", "optional", "")],
    "ProgramDesc": [
        ("blocks", 1, "message", "repeated", "BlockDesc"),
        ("version", 4, "message", "optional", "Version"),
    ],
}
PADDLE_FP32, PADDLE_LOD_TENSOR, PADDLE_FEED, PADDLE_FETCH, PADDLE_ATTR_INT = 5, 7, 9, 10, 0


def save_paddle(path: Path) -> Path:
    """A Paddle inference program (.pdmodel): feed x, elementwise_add with the persistable
    `offsets`, fetch y; the offsets in .pdiparams, in Paddle's tensor stream format."""
    classes = _message_classes("paddle.framework.proto", _PADDLE_MESSAGES)
    program = classes["ProgramDesc"]()
    program.version.version = 0
    block = program.blocks.add(idx=0, parent_idx=-1)

    def variable(
        name: str, kind: int, dims: tuple[int, ...] = (), persistable: bool = False
    ) -> None:
        var = block.vars.add(name=name, persistable=persistable)
        var.type.type = kind
        if kind == PADDLE_LOD_TENSOR:
            var.type.lod_tensor.tensor.data_type = PADDLE_FP32
            var.type.lod_tensor.tensor.dims.extend(dims)

    def op(kind: str, inputs: dict[str, str], outputs: dict[str, str], **ints: int) -> None:
        node = block.ops.add(type=kind)
        for parameter, argument in inputs.items():
            node.inputs.add(parameter=parameter, arguments=[argument])
        for parameter, argument in outputs.items():
            node.outputs.add(parameter=parameter, arguments=[argument])
        for name, value in ints.items():
            node.attrs.add(name=name, type=PADDLE_ATTR_INT, i=value)

    variable("feed", PADDLE_FEED, persistable=True)
    variable("fetch", PADDLE_FETCH, persistable=True)
    variable(INPUT, PADDLE_LOD_TENSOR, SHAPE)
    variable("offsets", PADDLE_LOD_TENSOR, (3,), persistable=True)
    variable(OUTPUT, PADDLE_LOD_TENSOR, SHAPE)
    op("feed", {"X": "feed"}, {"Out": INPUT}, col=0)
    op("elementwise_add", {"X": INPUT, "Y": "offsets"}, {"Out": OUTPUT}, axis=-1)
    op("fetch", {"X": OUTPUT}, {"Out": "fetch"}, col=0)
    desc = classes["VarType.TensorDesc"](data_type=PADDLE_FP32, dims=[3]).SerializeToString()
    # Per persistable tensor (by name): version u32, LoD level u64, version u32, the
    # TensorDesc's size i32 and bytes, then the data.
    params = struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + OFFSETS.tobytes()
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.pdmodel").write_bytes(program.SerializeToString())
    (path / "model.pdiparams").write_bytes(params)
    return path / "model.pdmodel"


# The formats the tests serve: folder name -> writer of one version folder.
FORMATS = {
    "ir": save_ir,
    "onnx": save_onnx,
    "tflite": save_tflite,
    "tf_frozen": save_tf_frozen,
    "tf_saved_model": save_tf_saved_model,
    "paddle": save_paddle,
}
