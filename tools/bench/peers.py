"""`loom-bench --peers`: ONNX Runtime and OpenVINO beside Loom, numpy and torch, in the same
process (the `anchors` extra: onnx, onnxruntime, openvino, onnxscript; each imported only
here, and only when installed: a runtime that is missing is left out and named).

Kernels run as one-node ONNX graphs, the weight (B, the filter) a constant initializer as a
deployed model has it (the runtimes may prepack it once; Loom's kernel takes it as an
argument and packs it at each call):
- f32: `MatMul` / `Conv`, in ONNX Runtime and in OpenVINO (`INFERENCE_PRECISION_HINT` f32).
- bf16: OpenVINO on the f32 graph with the bf16 precision hint (its way of running bf16:
  on a CPU without bf16 units it runs f32, and the peer's name says which it ran, read from
  the compiled model's runtime precision); ONNX Runtime has no bf16 MatMul or Conv on the CPU.
- int8 (u8 x s8 -> i32): ONNX Runtime's `MatMulInteger` / `ConvInteger`; OpenVINO on the
  quantized graph `DequantizeLinear` -> `MatMul`/`Conv` (scales 1, zero points 0: the same
  sums, as f32), which its low-precision transformations run in int8 where it can.
Models are exported with `torch.onnx.export` (f32; for bf16, OpenVINO runs the f32 export
with the bf16 hint, as it does by default on CPUs with bf16 units).

Each peer is checked once against the reference the row uses: `check(peer)` gives its max
error, which the tables show beside the bound (ONNX Runtime's `MatMulInteger` on AVX2
saturates u8 x s8 pair sums in 16 bits, for one).
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dialects.loom import conv2d_output_hw

#: the runtimes `--peers` times, by the module that provides each
RUNTIMES = {"onnxruntime": "ONNX Runtime", "openvino": "OpenVINO"}


@dataclass
class Peer:
    """A runtime's compiled graph: `run()` computes the result (as a numpy array)."""

    name: str
    run: Callable[[], np.ndarray]

    def check(self, want: np.ndarray) -> float:
        """The max |result - want| of one run."""
        got = np.asarray(self.run(), dtype=np.float64).reshape(want.shape)
        return float(np.abs(got - want.astype(np.float64)).max())


def versions() -> dict[str, str | None]:
    """Each runtime's version, None where it is not installed."""
    found = {}
    for module in RUNTIMES:
        try:
            found[module] = __import__(module).__version__
        except ImportError:
            found[module] = None
    return found


def header() -> str:
    """One line naming the runtimes and versions (and what is missing)."""
    parts = [f"{RUNTIMES[m]} {v}" if v else f"{RUNTIMES[m]}: not installed (pip install 'loomir[anchors]')"
             for m, v in versions().items()]
    if not _installed("onnx"):
        parts.append("onnx: not installed, so neither runs (pip install 'loomir[anchors]')")
    return "peers: " + ", ".join(parts)


# ---- one-node graphs -------------------------------------------------------------------


def _graph(nodes, inputs: dict[str, np.ndarray], output: str, out_dtype, out_shape, constants: dict[str, np.ndarray]):
    import onnx
    from onnx import helper, numpy_helper

    to_onnx = onnx.helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        nodes, "loom_bench_peer",
        [helper.make_tensor_value_info(name, to_onnx(a.dtype), list(a.shape)) for name, a in inputs.items()],
        [helper.make_tensor_value_info(output, to_onnx(np.dtype(out_dtype)), list(out_shape))],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(a), name) for name, a in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # (what both runtimes read)
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _ort(model: bytes, feeds: dict[str, np.ndarray], threads: int) -> Callable[[], np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)[0]


def _openvino(model: bytes, feeds: list[np.ndarray], threads: int, precision: str) -> tuple[Callable, str]:
    """OpenVINO's compiled model and the precision its main node ran in (its runtime info)."""
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(model), "CPU", {
        "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_PRECISION_HINT": precision})
    request = compiled.create_infer_request()
    ran = "?"
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" in info and info["layerType"].astype(str) in ("FullyConnected", "MatMul", "Convolution"):
            ran = info["runtimePrecision"].astype(str)
    return (lambda: request.infer(feeds, share_inputs=True)[0]), ran


def _precision_name(ran: str) -> str:
    return {"f32": "f32", "bf16": "bf16", "i8": "int8", "u8": "int8"}.get(ran, ran)


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def kernel_peers(op: str, a: np.ndarray, b: np.ndarray, dtype: str, threads: int, *,
                 conv: tuple | None = None) -> list[Peer]:
    """The runtimes' kernels of `a @ b` (op "matmul") or of the NCHW conv2d of `a` with the
    FCRS filter `b` (op "conv2d", `conv` = (strides, padding, dilations)), a of the input type
    of `dtype` ("f32", "bf16": bf16 values given as f32 arrays, "int8": u8 a, s8 b, "s8":
    s8 a and b)."""
    peers: list[Peer] = []
    if not _installed("onnx"):  # (the graphs are built with it)
        return peers
    out_shape, attrs = ((a.shape[0], b.shape[1]), {}) if op == "matmul" else _conv_node(a, b, conv)
    from onnx import helper

    kind = "MatMul" if op == "matmul" else "Conv"
    if dtype in ("f32", "bf16"):
        model = _graph([helper.make_node(kind, ["A", "B"], ["Y"], **attrs)], {"A": a}, "Y", np.float32, out_shape,
                       {"B": b})
        if dtype == "f32" and _installed("onnxruntime"):
            peers.append(Peer(f"ONNX Runtime {kind}", _ort(model, {"A": a}, threads)))
        if _installed("openvino"):
            run, ran = _openvino(model, [a], threads, dtype)
            hint = "" if dtype == "f32" else f" (bf16 hint, ran {_precision_name(ran)})"
            peers.append(Peer(f"OpenVINO {kind}{hint}", run))
        return peers
    integer = kind + "Integer"
    if _installed("onnxruntime"):
        model = _graph([helper.make_node(integer, ["A", "B"], ["Y"], **attrs)], {"A": a}, "Y", np.int32, out_shape,
                       {"B": b})
        peers.append(Peer(f"ONNX Runtime {integer}", _ort(model, {"A": a}, threads)))
    if _installed("openvino"):
        one = np.array(1.0, np.float32)
        model = _graph([helper.make_node("DequantizeLinear", ["A", "scale", "za"], ["Af"]),
                        helper.make_node("DequantizeLinear", ["B", "scale", "zb"], ["Bf"]),
                        helper.make_node(kind, ["Af", "Bf"], ["Y"], **attrs)],
                       {"A": a}, "Y", np.float32, out_shape,
                       {"B": b, "scale": one, "za": np.array(0, a.dtype), "zb": np.array(0, np.int8)})
        run, ran = _openvino(model, [a], threads, "f32")
        peers.append(Peer(f"OpenVINO int8 {kind} (ran {_precision_name(ran)})", run))
    return peers


@dataclass(frozen=True)
class Quantized:
    """A quantized conv2d layer's parameters beside its u8 input and s8 filter: the i32
    bias (of scale `x_scale * w_scales[f]`), the input's scale (zero point 0), the filter's
    per output channel (zero points 0), the output's scale and zero point."""

    bias: np.ndarray
    x_scale: float
    w_scales: np.ndarray
    y_scale: float
    y_zero: int


def quantized_conv_peers(x: np.ndarray, w: np.ndarray, q: Quantized, threads: int, conv: tuple) -> list[Peer]:
    """The runtimes' quantized conv2d layers (NCHW, FCRS) with the requantize to u8 in the
    kernel: ONNX Runtime's `QLinearConv`; OpenVINO on the QDQ graph `DequantizeLinear` ->
    `Conv` -> `QuantizeLinear` (which its low-precision transformations run as an int8
    convolution where they can; the name says what it ran)."""
    peers: list[Peer] = []
    if not _installed("onnx"):
        return peers
    from onnx import helper

    out_shape, attrs = _conv_node(x, w, conv)
    f = w.shape[0]
    scales = {"xs": np.array(q.x_scale, np.float32), "xz": np.array(0, np.uint8),
              "ws": q.w_scales.astype(np.float32), "wz": np.zeros(f, np.int8),
              "ys": np.array(q.y_scale, np.float32), "yz": np.array(q.y_zero, np.uint8)}
    if _installed("onnxruntime"):
        model = _graph([helper.make_node("QLinearConv", ["X", "xs", "xz", "W", "ws", "wz", "ys", "yz", "B"], ["Y"],
                                         **attrs)],
                       {"X": x}, "Y", np.uint8, out_shape, {"W": w, "B": q.bias.astype(np.int32), **scales})
        peers.append(Peer("ONNX Runtime QLinearConv", _ort(model, {"X": x}, threads)))
    if _installed("openvino"):
        bias = (q.bias * (q.x_scale * q.w_scales.astype(np.float64))).astype(np.float32)
        model = _graph([helper.make_node("DequantizeLinear", ["X", "xs", "xz"], ["Xf"]),
                        helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["Wf"], axis=0),
                        helper.make_node("Conv", ["Xf", "Wf", "Bf"], ["Yf"], **attrs),
                        helper.make_node("QuantizeLinear", ["Yf", "ys", "yz"], ["Y"])],
                       {"X": x}, "Y", np.uint8, out_shape, {"W": w, "Bf": bias, **scales})
        run, ran = _openvino(model, [x], threads, "f32")
        peers.append(Peer(f"OpenVINO int8 Conv, requantized (ran {_precision_name(ran)})", run))
    return peers


def _conv_node(x: np.ndarray, w: np.ndarray, conv: tuple) -> tuple[tuple[int, ...], dict]:
    """The output shape of the NCHW conv2d of `x` by the FCRS filter `w` (`conv` = (strides,
    padding, dilations)) and the attributes of its ONNX node."""
    strides, padding, dilations = conv
    (n, _, h, wd), (f, _, r, s) = x.shape, w.shape
    attrs = dict(strides=list(strides), pads=[padding[0], padding[1], padding[0], padding[1]],
                 dilations=list(dilations))
    return (n, f, *conv2d_output_hw(h, wd, r, s, strides, padding, dilations)), attrs


def model_peers(model, x, threads: int, dtype: str) -> list[Peer]:
    """The runtimes on the model exported with torch.onnx.export (the f32 model: for bf16,
    OpenVINO with the bf16 hint; ONNX Runtime has no bf16 convolutions on the CPU)."""
    import torch

    if not _installed("onnx") or not (_installed("onnxruntime") or _installed("openvino")):
        return []
    model32, x32 = copy.deepcopy(model).float(), x.float()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        exported = torch.onnx.export(model32, (x32,), dynamo=True, verbose=False).model_proto.SerializeToString()
    feed = x32.numpy()
    peers = []
    if dtype == "f32" and _installed("onnxruntime"):
        import onnx

        name = onnx.load_from_string(exported).graph.input[0].name
        peers.append(Peer("ONNX Runtime", _ort(exported, {name: feed}, threads)))
    if _installed("openvino"):
        run, ran = _openvino(exported, [feed], threads, dtype)
        peers.append(Peer("OpenVINO" + ("" if dtype == "f32" else f" (bf16 hint, ran {_precision_name(ran)})"), run))
    return peers


def nchw(a: np.ndarray, w: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """A conv2d's input and filter as the ONNX graph takes them (NCHW, FCRS), copied once
    from Loom's NHWC / HWCF."""
    if layout == "nhwc":
        return np.ascontiguousarray(a.transpose(0, 3, 1, 2)), np.ascontiguousarray(w.transpose(3, 2, 0, 1))
    return a, w


def errors_note(errors: dict[str, dict[str, float]], bounds: dict[str, float]) -> str:
    """A line per peer whose result was off by more than the row's bound, with its error
    (the rows of `errors`: label -> peer -> max error)."""
    lines = []
    for label, by_peer in errors.items():
        for peer, err in by_peer.items():
            if not err <= bounds[label]:
                lines.append(f"- {peer} on {label}: max error {err:.4g} (bound {bounds[label]:.3g})")
    return ("\npeers' results off by more than the bound (timed all the same):\n" + "\n".join(lines)) if lines else ""

