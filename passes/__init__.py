"""Loom's passes, registered lazily: flag -> thunk that imports the pass class.

Each pass lives in its own module named after its flag (dashes become underscores).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # xDSL loads with the passes, not with `passes.support` (a kernel from the disk cache needs neither)
    from xdsl.passes import ModulePass

LOOM_PASSES: dict[str, str] = {
    # flag: "module:ClassName"
    "loom-bufferize": "conversion.loom_bufferize:LoomBufferizePass",
    "convert-loom-to-affine": "conversion.convert_loom_to_affine:ConvertLoomToAffinePass",
    "loom-outline": "schedule.loom_outline:LoomOutlinePass",
    "loom-profile": "conversion.loom_profile:LoomProfilePass",
    "loom-lower-affine": "conversion.loom_lower_affine:LoomLowerAffinePass",
    "loom-lower-parallel": "conversion.loom_lower_parallel:LoomLowerParallelPass",
    "loom-convert-to-llvm": "conversion.loom_convert_to_llvm:LoomConvertToLLVMPass",
    "loom-naive": "schedule.loom_naive:LoomNaivePipelinePass",
    "loom-default": "schedule.loom_default:LoomDefaultPass",
    "loom-im2col": "schedule.loom_im2col:LoomIm2colPass",
    "loom-direct-conv": "schedule.loom_direct_conv:LoomDirectConvPass",
    "loom-grouped-conv": "schedule.loom_grouped_conv:LoomGroupedConvPass",
    "loom-winograd": "schedule.loom_winograd:LoomWinogradPass",
    "loom-fuse-epilogue": "schedule.loom_fuse_epilogue:LoomFuseEpiloguePass",
    "loom-pack": "schedule.loom_pack:LoomPackPass",
    "loom-peel": "schedule.loom_peel:LoomPeelPass",
    "loom-prefetch": "schedule.loom_prefetch:LoomPrefetchPass",
    "loom-fuse-pack": "schedule.loom_fuse_pack:LoomFusePackPass",
    "loom-transpose-copy": "schedule.loom_transpose_copy:LoomTransposeCopyPass",
    "loom-tile": "schedule.loom_tile:LoomTilePass",
    "loom-unroll": "schedule.loom_unroll:LoomUnrollPass",
    "loom-compensate": "schedule.loom_compensate:LoomCompensatePass",
    "loom-dot": "schedule.loom_dot:LoomDotPass",
    "loom-hoist": "schedule.loom_hoist:LoomHoistPass",
    "loom-interchange": "schedule.loom_interchange:LoomInterchangePass",
    "loom-unroll-jam": "schedule.loom_unroll_jam:LoomUnrollJamPass",
    "loom-vectorize": "schedule.loom_vectorize:LoomVectorizePass",
    "loom-parallelize": "schedule.loom_parallelize:LoomParallelizePass",
}


def _thunk(spec: str) -> Callable[[], type[ModulePass]]:
    module, cls = spec.split(":")

    def load() -> type[ModulePass]:
        return getattr(import_module(f"passes.{module}"), cls)

    return load


def get_loom_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {flag: _thunk(spec) for flag, spec in LOOM_PASSES.items()}


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """xDSL's own passes plus Loom's (Loom's win on a name clash)."""
    from xdsl.transforms import get_all_passes as xdsl_passes

    return {**xdsl_passes(), **get_loom_passes()}
