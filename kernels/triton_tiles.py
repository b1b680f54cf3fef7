"""Tiles of the Triton kernels and the list of every launch configuration.

``block_config`` gives each kernel its tiles (BLOCK_M x BLOCK_N, warps, stages) for a head dim
and an element size; ``LONGFORMER_TRITON_TILES`` overrides them for tuning. ``KERNEL_FLAGS``
names each kernel's boolean tl.constexpr switches, and ``launch_configurations`` lists every
(kernel, dtype, BLOCK_D, switches, tiles) the launchers may pick: the launchers
(``triton_attention.py``) refuse anything else, and the compile check (``compile_table.py``)
compiles exactly this list. No launch happens here.
"""
import functools
import itertools
import os
from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

import torch
import triton

from . import triton_device

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256  # one (BLOCK, D) tile per operand lives in registers / shared memory
# Set to 1 to run the tiles block_config picks for GPUs in the interpreter (tests do).
GPU_TILES_ENV = "LONGFORMER_TRITON_GPU_TILES"
# Tiles for tuning on a GPU, read once at import: "BMxBNxWARPSxSTAGES" for every kernel, or
# "band_fwd=128x64x8x2,band_bwd_dq=..." per kernel (names without the leading _ and _kernel);
# ``python -m longformer_tools.gpu.gpu_tune`` prints the value it found best.
TILES_ENV = "LONGFORMER_TRITON_TILES"


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _gpu_tiles_forced() -> bool:
    return os.environ.get(GPU_TILES_ENV, "0") not in ("", "0")


@dataclass(frozen=True)
class BlockConfig:
    block_m: int
    block_n: int
    block_d: int
    num_warps: int
    num_stages: int


# 16-bit inputs, D <= 64: the fastest tiles per kernel of a sweep on an H200 (bf16, B = 8,
# H = 12, N = 16,384, w = 256, D = 64, 8 global tokens; docs/results/gpu_h200.md). Every kernel then
# takes 64 x 64 tiles, 4 warps, 2 stages unless named here.
TILES_16BIT_D64 = {"_band_fwd_kernel": (64, 32), "_band_bwd_dq_kernel": (64, 32), "_band_bwd_dkdv_kernel": (32, 64),
                   "_global_rows_fwd_kernel": (64, 128)}
WARPS_STAGES_16BIT_D64 = {"_global_rows_bwd_dq_kernel": (4, 3), "_cross_bwd_dkdv_kernel": (4, 3)}


def short_name(kernel: str) -> str:
    """The name TILES_ENV and the results pages use for a kernel: "_band_fwd_kernel" -> "band_fwd"."""
    return kernel.strip("_").replace("_kernel", "")


def _tile_overrides() -> Dict[str, Tuple[int, int, int, int]]:
    """{kernel short name or "*": (BLOCK_M, BLOCK_N, warps, stages)} from TILES_ENV."""
    text = os.environ.get(TILES_ENV, "").strip()
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, tiles = item.rpartition("=")
        try:
            values = tuple(int(x) for x in tiles.split("x"))
            assert len(values) == 4 and all(v > 0 for v in values)
            assert values[0] & (values[0] - 1) == 0 and values[1] & (values[1] - 1) == 0
        except (ValueError, AssertionError):
            raise ValueError(f"{TILES_ENV}: {item!r} is not [KERNEL=]BMxBNxWARPSxSTAGES with power-of-two "
                             "BM, BN (e.g. 128x64x8x2)") from None
        known = {short_name(k) for k in KERNEL_FLAGS}
        if name and name not in known:
            raise ValueError(f"{TILES_ENV}: unknown kernel {name!r}; one of {sorted(known)}")
        overrides[name or "*"] = values
    return overrides


def block_config(head_dim: int, element_size: int, interpret: bool, kernel: str = "") -> BlockConfig:
    """Fixed tile sizes for a head dim and an input element size (2: fp16/bf16, 4: fp32).

    One fixed config per case: multi-config @triton.autotune does not run in the interpreter.
    D is padded to a power of two >= 16 (tl.dot's minimum). The interpreter's cost is per
    operation, not per element, so 32 x 32 tiles run about 3x faster there than 16 x 16; set
    LONGFORMER_TRITON_GPU_TILES=1 to run the GPU tiles in the interpreter (the tests do).
    On GPUs the 16-bit tiles shrink as a row of q / k / v / dO grows, so that every kernel fits
    the shared memory of Ampere and later (99 KiB per block on sm_86/sm_89). fp32 runs its dots
    with input_precision="ieee", i.e. on the FMA units, not tensor cores, with the tiles in
    registers: its tiles are smaller (64 x 64 fp32 tiles spilled kilobytes of registers per
    thread when compiled). That every kernel in every configuration the launchers can pick
    compiles for sm_80/86/89/90 and fits their shared memory is checked on a CPU by
    ``tests/kernels/test_triton_compile.py``; ``longformer_tools.gpu.compile_table`` prints the
    shared memory and register spills of each. No number here is a GPU timing.
    """
    block_d = max(16, triton.next_power_of_2(head_dim))
    if interpret:
        return BlockConfig(32, 32, block_d, 1, 1)
    overrides = _TILE_OVERRIDES
    tiles = overrides.get(short_name(kernel), overrides.get("*"))
    if tiles is not None:
        return BlockConfig(tiles[0], tiles[1], block_d, tiles[2], tiles[3])
    if element_size == 4:
        if block_d <= 64:
            return BlockConfig(32, 32, block_d, 4, 2)
        return BlockConfig(16, 16, block_d, 4, 1)
    if block_d <= 64:
        return BlockConfig(*TILES_16BIT_D64.get(kernel, (64, 64)), block_d,
                           *WARPS_STAGES_16BIT_D64.get(kernel, (4, 2)))
    if block_d <= 128:
        return BlockConfig(64, 32, block_d, 4, 2)
    return BlockConfig(32, 32, block_d, 4, 1)


BLOCK_DS = (16, 32, 64, 128, 256)  # every BLOCK_D a head dim in [1, MAX_HEAD_DIM] gives
# The kernels and the tl.constexpr flags each takes (besides the tiles and PRECISION).
KERNEL_FLAGS: Dict[str, Tuple[str, ...]] = {
    "_band_fwd_kernel": ("CAUSAL", "DROPOUT", "HAS_BIAS", "DILATED"),
    "_global_rows_fwd_kernel": ("DROPOUT",),
    "_band_bwd_dq_kernel": ("CAUSAL", "DROPOUT", "HAS_BIAS", "DILATED"),
    "_band_bwd_dkdv_kernel": ("CAUSAL", "DROPOUT", "HAS_BIAS", "DILATED"),
    "_cross_bwd_dkdv_kernel": ("GLOBAL_KEYS", "DROPOUT"),
    "_global_rows_bwd_dq_kernel": ("DROPOUT",),
    "_delta_kernel": (),
    "_global_rows_combine_kernel": (),
    "_sum_rows_kernel": (),
}
PRECISION = "ieee"  # only read for fp32 operands: exact fp32 products, no tf32
_TILE_OVERRIDES = _tile_overrides()


@dataclass(frozen=True)
class LaunchConfig:
    """One compiled variant of one kernel: what a launcher may pick."""

    kernel: str  # a key of KERNEL_FLAGS
    dtype: torch.dtype  # of q, k, v (and everything of the families)
    flags: Tuple[Tuple[str, bool], ...]  # the kernel's boolean tl.constexpr, by name
    block: BlockConfig

    @property
    def constexprs(self) -> Dict[str, object]:
        """The tl.constexpr arguments of the kernel: its flags, tiles and precision (those of
        them it takes: the delta kernel has no key tile and no dot)."""
        every = dict(self.flags, BLOCK_M=self.block.block_m, BLOCK_N=self.block.block_n,
                     BLOCK_D=self.block.block_d, PRECISION=PRECISION)
        taken = getattr(triton_device, self.kernel).arg_names
        return {name: value for name, value in every.items() if name in taken}

    @property
    def name(self) -> str:
        d = str(self.dtype).replace("torch.", "")
        on = "".join(f" {k.lower()}" for k, v in self.flags if v)
        b = self.block
        return (f"{self.kernel.strip('_')} {d} D{b.block_d} {b.block_m}x{b.block_n}"
                f" w{b.num_warps} s{b.num_stages}{on}")


@functools.lru_cache(maxsize=2)
def launch_configurations(interpret: bool = False) -> Tuple[LaunchConfig, ...]:
    """Every (kernel, dtype, BLOCK_D, flags, tiles) the launchers can choose, with the tiles
    ``block_config`` gives on a GPU (interpret=False) or in the interpreter. The launchers
    refuse anything else, so compiling this list covers every kernel a GPU can be asked to run.
    """
    configs = []
    for kernel, flags in KERNEL_FLAGS.items():
        for dtype, block_d in itertools.product(SUPPORTED_DTYPES, BLOCK_DS):
            block = block_config(block_d, torch.empty((), dtype=dtype).element_size(), interpret, kernel)
            for values in itertools.product((False, True), repeat=len(flags)):
                configs.append(LaunchConfig(kernel, dtype, tuple(zip(flags, values)), block))
    return tuple(configs)


@functools.lru_cache(maxsize=2)
def _known_configs(interpret: bool) -> FrozenSet[LaunchConfig]:
    return frozenset(launch_configurations(interpret))
