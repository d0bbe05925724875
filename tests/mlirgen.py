"""MLIR text for test kernels."""

import numpy as np

DT = {np.float32: "f32", np.float64: "f64"}


def ty(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + DT[dtype] + ">"


def matmul(a_shape, b_shape, c_shape, dtype) -> str:
    ta, tb, tc = ty(a_shape, dtype), ty(b_shape, dtype), ty(c_shape, dtype)
    return f"""func.func @mm(%a: {ta}, %b: {tb}) -> {tc} {{
  %c = loom.matmul %a, %b : ({ta}, {tb}) -> {tc}
  func.return %c : {tc}
}}"""


def conv2d(x_shape, w_shape, y_shape, strides, padding, dilations, dtype) -> str:
    tx, tw, ty_ = ty(x_shape, dtype), ty(w_shape, dtype), ty(y_shape, dtype)
    attrs = (f"{{strides = array<i64: {strides[0]}, {strides[1]}>, padding = array<i64: {padding[0]}, "
             f"{padding[1]}>, dilations = array<i64: {dilations[0]}, {dilations[1]}>}}")
    return f"""func.func @conv(%x: {tx}, %w: {tw}) -> {ty_} {{
  %y = loom.conv2d %x, %w {attrs} : ({tx}, {tw}) -> {ty_}
  func.return %y : {ty_}
}}"""


def binary(op, a_shape, b_shape, out_shape, dtype, relu=False) -> str:
    ta, tb, to = ty(a_shape, dtype), ty(b_shape, dtype), ty(out_shape, dtype)
    tail = f"  %r = loom.relu %s : {to}\n  func.return %r : {to}" if relu else f"  func.return %s : {to}"
    return f"""func.func @ew(%a: {ta}, %b: {tb}) -> {to} {{
  %s = loom.{op} %a, %b : ({ta}, {tb}) -> {to}
{tail}
}}"""
