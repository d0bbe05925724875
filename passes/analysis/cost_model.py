"""The cost model behind the `default` pipeline: register tile, cache tiles and packing for
a matmul C[M,N] += A[M,K] B[K,N] on a target (passes/support/target.py), and the traffic that
schedule moves between memory levels, so that `--remarks` can say why.

The schedule is BLIS's (Goto's) loop nest, as loom's passes build it, with the two
register-tile loops in the order that keeps A's sliver in L1:

    for j_t in N step NC            B block KC x NC (L3)
      for k_t in K step KC          pack B[k_t:+KC, j_t:+NC] as NC/NR panels KC x NR
        for i_t in M step MC        pack A[i_t:+MC, k_t:+KC] as MC/MR panels KC x MR (L2)
          for i_r in MC step MR     one A sliver KC x MR stays in L1
            for j_r in NC step NR   C[i_r:+MR, j_r:+NR] in MR*NR/w vector registers;
                                    the B panels stream through L1, in the order packed
              for k in KC           MR broadcasts of A, NR/w vector loads of B, MR*NR/w fmas

BLIS's order (j_r outside i_r) keeps a B panel in L1 instead; at KC=512 that panel is
all of L1 (6x16 on 32 KiB), so it could not stay beside the A slivers streaming past it:
both were read from L2 for every tile. With the A sliver resident (KC x MR: 24 KiB at
KC=1024) only the B panels move, and they move in one sequential walk over the packed block, which the
hardware prefetchers follow. Measured interleaved with numpy, 8 runs each, against the
previous schedule (BLIS's order, KC=512, MC=192): 2048^3 0.99 -> 1.03x numpy (faster in
7 of 8 runs), 1024^3 0.95 -> 0.99x (in 8 of 8).

Register tile: NR = nv*w (w lanes per vector); MR*nv accumulators, nv vectors of B and one
broadcast of A live at once (loom-unroll-jam groups the copies by row, so one broadcast is
live at a time): MR*nv + nv + 1 <= registers (see `register_tile` for the choice among
those). L1 -> register traffic is n^3/NR (A, broadcasts) + n^3/MR (B, in elements) for
n^3 fmas. AVX2 (16 registers): 6x16; AVX-512 (32): 14x32.

Cache tiles, from the sizes: KC so that the A sliver (KC x MR) takes 3/4 of L1, clamped
to K (a single k block where K allows: 197x768x768 ran 1.00x with KC=768 against 0.94x
with 512 and 0.97x with 384; at 2048^3 KC=512, 680, 768 and 1024 were within 1%); MC so
that the packed A block (MC x KC) takes 3/4 of L2, a multiple of MR (packed, then read
sliver by sliver while it is still in L2); NC so that the packed B block (KC x NC), which
every row tile streams again, takes 1/8 of L3 (each NC block packs A again, so a larger
NC packs A less: at KC=512, 2048^3 ran 1.02x with NC=1024, 0.98x with 2048 and 0.96x
with 512), a multiple of NR. Each clamped to the (peeled) extent. Earlier, with BLIS's
order, MC=192 beat MC=96 by 2-4% (fewer MC blocks, each streaming the B block once);
in this order MC hardly matters (96, 192 and 384 within 1% at 2048^3).
`loom-bench --ablation` shows what each step of the schedule is worth.

The panel order, for a matmul whose rows fit one block (M <= MC: an activation times
a weight matrix, 128x768 @ 768x3072) on one thread. There the order above packs each B
block into L3 once for only M/MR row tiles, and the copy is a pass of its own over
memory (9.4 MB of B read and 9.4 MB written at M = 128: 1.2 ms of 6.6). Instead:

    for k_t in K step KC          pack A[:, k_t:+KC] as M/MR panels KC x MR (L2)
      for j_c in N step NC        a column block per thread (NC = N on one thread)
        for j_r in NC step NR       B's panel KC x NR (L2, one per thread): copied by the
          for i_r in M step MR        first row tile as it computes (loom-fuse-pack); the
            for k in KC                 others read it and prefetch the next panel's source

so that B streams from memory into the fmas, a panel ahead of its use. Where K is split
into k blocks, every block reads and writes all of C again: KC is halved until A's block,
B's panel and C fit in 3/4 of L2 (128x768x3072: KC 768 -> 384, 1.154 -> 1.178x numpy's
`np.maximum(x @ w + b, 0)`, and 1.7% in a second run). Measured on
znver4, one thread, against the order above (interleaved, ms): 128x3072x768 6.59 ->
5.82 (numpy 6.99), 128x768x3072 6.64 -> 6.13; at 1024x3072x768 (8 row blocks of 128)
it was no faster (46.6 against 46.6), so larger M keeps the order above. On several
threads each takes a block of whole panels (j_c runs in parallel, B's panel buffer has
a slot per iteration of it: loom-pack's `private`), not the rows: a loop of row tiles
per panel would be a fork and join per panel. Two threads, 128x3072x768 with its
epilogue, interleaved: 2.85 ms against 3.13 for the order above (one thread 5.48).
A direct convolution whose rows fit one block (ResNet's 7x7 maps at batch 1, 49 rows)
takes this order too, its windows read in place, where the staged input fits half of L2
(read again per panel): in the order above every row tile streams the filter's k block
(1.7 MiB, past L2) from L3, and the threads fork and join per k block to pack it. znver4,
in one process, interleaved, ms, order above -> panel order: two threads, 3x3 C512 7^2
1.55 -> 1.26 (a second run 1.48 -> 1.12), 3x3/2 C256 -> 512 0.82 -> 0.65 (0.74 -> 0.57),
its 1x1/2 projection 0.152 -> 0.091; one thread 1.00x, 1.07-1.09x and 1.08x. At batch 8 (392 rows, past one block) the order above
stays: the panel order there ran 0.88-0.95x (the windows no longer fit L2 beside B); so
does the 1x1/2 projection of 56^2 x 64 (its staged input 800 KiB: in the panel order
0.99x on one thread, 0.89x on two).

On the CPUs of `A_IN_PLACE` (znver4) A is not packed in either order where its rows are
contiguous along k: each k step broadcasts MR elements, one from each of MR rows, and
those MR sequential streams cost less than a pass over A per block of columns (and the
panel order there takes its own tile, `MEASURED_PANEL_TILES`). So on a dot-product
instruction, whose broadcast reads a group of k consecutive elements of a row, as A's row
holds them (loom-default decides whether the instruction can: not s8 x s8, which shifts A
as it packs).

Operands that fit in L1 together (64^3) are not packed: the copies would cost more than
the strided reads they save. A matmul with fewer rows than MR (a matrix-vector product,
1 x 4096 x 4096) is memory-bound: no packing either (B is read once anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dialects import winograd
from passes.support.target import Target

FLOAT = 4  # bytes of f32 (f64: 8; plans take the element size)
#: the ops (`loom_parallelize.estimated_work`: vector and scalar ops alike) below which a
#: loop stays serial in the default pipeline. Starting and joining libgomp's team, whose
#: threads spin between the regions of one call, costs a few microseconds, the time of
#: some 10,000 such ops; measured with `loom-default{skip=parallel},loom-parallelize{min-work=W}`
#: on 2 threads, 20,000 was the best of 0, 10,000, 20,000, 50,000, 100,000 and 400,000
#: at every shape from 64^3 to 1024^3 (0 puts C's zero fill on threads, at a loss;
#: 50,000 and up leave the packing of B serial at 128x768x3072, 0.75x of 20,000's speed)
MIN_PARALLEL_WORK = 20_000
#: how many iterations of k a plan without row tiles (a matrix-vector product, a few
#: rows) jams into one body: as many fmas per load and store of C. 1x4096x4096 on
#: znver4, one thread: 2: 10.6, 4: 12.9, 8: 13.8-14.1, 16: 11.1 GFLOP/s (numpy 14.0)
MV_K_JAM = 8
#: how many vectors of C's row that plan jams (and peels the columns for): 2, as measured
#: with MV_K_JAM; the register tile's NR (48 columns with znver4's 8x48) would peel 4096
#: columns into 4080 + 16 and leave 2 threads blocks of unequal width
MV_J_VECTORS = 2
#: a direct convolution's windows read A at a row of S*C taps, then jump to the next tap
#: row: the reads divide k by S*C. Where S*C is at most this (and divides KC), k is
#: unroll-jammed by a whole row (`MatmulPlan.k_jam`): the copies' divisions are the row's,
#: once per row, not a division per k and row of the tile. The 7x7/2 stem (S*C = 21, K =
#: 147), znver3, one process, interleaved, the jam off -> on: 6.33 -> 3.74 ms on one
#: thread, 4.31 -> 1.84 on two; 3x3 C64 56^2 (S*C = 192, its k loop split at each row by
#: hand) 3.04 -> 3.09: long rows leave the division little to cost
WINDOW_RUN_JAM = 32


@dataclass(frozen=True)
class MatmulPlan:
    m: int
    n: int
    k: int
    mr: int
    nr: int
    mc: int
    nc: int
    kc: int
    lanes: int
    pack: bool
    why_no_pack: str = ""
    element_bytes: int = FLOAT
    #: the operand read in place, not packed ("A", "B"; "" for none): a direct
    #: convolution's windows, loom-direct-conv's implicit matrix
    in_place: str = ""
    #: the panel order (the module's doc): one row block, B a KC x NR panel at a time, a
    #: block of NC columns per thread
    panels: bool = False
    #: whether A is copied into panels of MR rows (where `pack`); on the CPUs of
    #: `A_IN_PLACE` its rows are read where they are
    pack_a: bool = True
    #: the bytes of a packed element of A and B where they are not C's (a dot-product
    #: layout's bytes, i16 or bf16), which the sizes of their blocks are told in
    packed_bytes: int | None = None
    #: in the panel order, how B's panel is copied (loom-fuse-pack): "fused", by the first
    #: row tile as it computes; "ahead", before its row tiles, in the groups of a
    #: dot-product instruction (which the fmas' vectors interleave), the copy prefetching
    #: the source of a later one; "before", the same where a nest between them reads the
    #: panel too (loom-compensate's column sums)
    b_copy: str = "fused"
    #: k unroll-jammed by this many iterations around the register tile: a direct
    #: convolution's window row of S*C taps where it is short (`WINDOW_RUN_JAM`), so that
    #: the k loop steps by whole rows and its copies share the division of k by S*C
    k_jam: int = 1

    @property
    def rows_tiled(self) -> bool:
        """Whether the MR x NR register tile applies; with fewer rows than MR the matmul
        is a (few-)row-vector times matrix product, scheduled as rows of B streamed."""
        return self.m >= self.mr

    def traffic(self) -> dict[str, float]:
        """Elements moved per memory level boundary for the whole matmul (estimates)."""
        m, n, k = self.m, self.n, self.k
        flops = m * n * k
        n_blocks = -(-n // (self.nr if self.panels else self.nc))  # A is read again per block (per panel)
        k_blocks = -(-k // self.kc)
        if not self.rows_tiled:  # B streamed once; C's rows read and written per 4 k
            return {"DRAM->L3": k * n + m * k + m * n, "L2->L1": k * n + m * k + 2 * m * n * k / 4,
                    "L1->registers": flops + 2 * flops / 4}
        return {
            # packing reads A once per NC block and B once; C is read and written per KC block
            "DRAM->L3": m * k * n_blocks + k * n + 2 * m * n * k_blocks,
            # B's panels stream through L1 once per row tile; each A sliver is read once per NC block
            "L2->L1": flops / self.mr + m * k * n_blocks,
            # broadcasts of A and vector loads of B (in elements)
            "L1->registers": flops / self.nr + flops / self.mr,
        }

    def describe(self) -> str:
        if not self.rows_tiled:
            words = [f"{self.m} row{'s' * (self.m != 1)} < MR={self.mr}: rows of B streamed once (loop order "
                     f"k, i, j), k unroll-jammed by {MV_K_JAM}, j in {self.lanes}-lane vectors"]
        else:
            words = [
                f"register tile {self.mr}x{self.nr} ({self.mr * -(-self.nr // self.lanes)} accumulators of "
                f"{self.lanes} lanes)",
                f"cache tiles MC={self.mc} NC={self.nc} KC={self.kc}",
            ]
            if self.k_jam > 1:
                words.append(f"k unroll-jammed by {self.k_jam}, a window row of taps: the division of k by it "
                             f"once per row")
            if self.panels:
                words.append("panel order: one row block, NC columns per thread, B a KC x NR panel at a time, " + {
                    "fused": "copied by the first row tile as it computes, the next panel prefetched by the others",
                    "ahead": "copied before its row tiles, in groups, each copy prefetching the rows of the "
                             "panel two ahead (where there is one)",
                    "before": "copied before its row tiles (its column sums read it), each copy prefetching the "
                              "rows of the panel two ahead (where there is one)"}[self.b_copy])
        if self.pack:
            e, rows = self.packed_bytes or self.element_bytes, min(self.m, self.mc)
            a = (f"packed A {self.mc}x{self.kc} ({self.mc * self.kc * e // 1024} KiB, L2)" if self.pack_a else
                 f"A's rows read in place, not packed ({rows}x{self.kc} a block, {rows * self.kc * e // 1024} KiB, L2)")
            b = (f"B {self.kc}x{self.nr} panels ({self.kc * self.nr * e // 1024} KiB, L2)" if self.panels else
                 f"B {self.kc}x{self.nc} ({self.kc * self.nc * e // 1024} KiB, L3)")
            sliver = f"A sliver {self.kc}x{self.mr} ({self.kc * self.mr * e // 1024} KiB, L1)"
            place = "read in place (the windows of the staged input)"
            words.append({"A": f"A {place}, packed {b}", "B": f"{a}, B {place}, {sliver}"}.get(
                self.in_place, f"{a}, {b}, {sliver}"))
        elif self.rows_tiled:
            words.append(f"no packing: {self.why_no_pack}")
        flops = self.m * self.n * self.k
        traffic = ", ".join(f"{level} {elements / 1e6:.3g}M" + (f" ({elements / flops:.3g}/fma)" if flops else "")
                            for level, elements in self.traffic().items())
        return "; ".join(words) + f"; estimated traffic in f{8 * self.element_bytes} elements: {traffic}"


#: register tiles (MR, NR) measured to beat the rule below on a CPU (LLVM's name), per
#: element size. znver4 (Zen 4, AVX-512 executed as two 256-bit halves), f32, one thread,
#: 8x48 against the rule's 14x32, GFLOP/s: 1024^3 105.0 vs 100.2, 2048^3 106.6 vs 104.4,
#: 128x768x3072 95.6 vs 86.3, 197x768x768 102.3 vs 100.8, 127x255x511 94.1 vs 85.5,
#: 64x3136x576 (a 3x3 conv's matmul) 83.2 vs 69.7, 256x196x256 97.7 vs 82.9 (12x32 and
#: 6x64 were slower than 8x48). 24 accumulators, as in BLIS's AVX-512 sgemm kernels, and
#: a longer A sliver per L1 (KC 768, not 432); fewer rows also leave smaller remainders.
MEASURED_TILES: dict[str, dict[int, tuple[int, int]]] = {"znver4": {4: (8, 48)}}
#: the same for a matmul whose A is read in place (an NHWC direct convolution: each of
#: the MR rows is a pixel of its own, whose address lives in a general register across
#: the k loop, and the N columns are the layer's F output channels, 64, 128, 256, 512).
#: znver4, f32, one thread, GFLOP/s (`loom-bench --conv --layout nhwc` layers), 4x64
#: against 8x48 / 14x32: 3x3 C64 56^2 113.1 / 112.2 / 112.0, 3x3 C128 28^2 109.8 / 75.4 /
#: 111.6, the 7x7/2 stem N8 89.2 / 66.8 / 51.1, 3x3 C512 7^2 80.3 / 56.7 / 88.8, 5x5
#: dilation 2 113.6 / 69.0 / 113.3, 3-channel CIFAR N32 91.5 / 89.2 / 68.4 (8x48 leaves
#: 64 channels as 48 + a 16-column copy; 14 rows' addresses do not fit the registers
#: beside the k loop's when K is short: 147 and 27 there; 3x64, 5x64, 8x32, 12x32 and
#: 6x64 were as fast or slower)
MEASURED_WINDOW_TILES: dict[str, dict[int, tuple[int, int]]] = {"znver4": {4: (4, 64)}}
#: the CPUs (LLVM's name) and element sizes on which a matmul reads A's rows where they
#: are (contiguous along k), MR at a time, instead of packing them into panels of MR rows:
#: the broadcasts of A need no contiguous sliver, and the copy is a pass over A per block
#: of columns. znver4, f32, `loom-bench --shapes` loom/numpy, A packed -> in place (two
#: runs each, alternating processes), the order of row tiles (8x48), one thread: 512^3
#: 0.98, 1.01 -> 1.07, 1.08; 1000^3 0.87, 0.92 -> 0.96, 0.96; 1024^3 1.07, 1.07 -> 1.08,
#: 1.08; 2048^3 1.06, 1.06 -> 1.05, 1.06; 1024x3072x768 (the MLP at batch 8) 1.02, 1.05 ->
#: 1.07, 1.06; 1024x768x3072 1.05, 1.05 -> 1.07, 1.07. Two threads (row blocks split
#: evenly): 512^3 1.00, 0.97 -> 1.11, 1.09; 1024^3 1.01, 1.10 -> 1.07, 1.18; 2048^3 1.04,
#: 1.04 -> 1.06, 1.08; 1024x3072x768 1.01, 1.04 -> 1.11, 1.07. The panel order: below
#: (`MEASURED_PANEL_TILES`). On a dot-product instruction (`dot`: vpdpbusd, vdpbf16ps) A's
#: rows hold each group of k side by side, as the broadcast reads it: A in place there
#: too, its tile `MEASURED_DOT_TILES` (4x64). znver4, in one process, interleaved, A packed
#: -> in place, u8 x s8 GOP/s, one thread, warm / after a 64 MiB sweep of the caches:
#: 128x3072x768 402 -> 403 / 352 -> 353, 197x768x768 422 -> 430 / 342 -> 355, 1024^3 414
#: -> 423 / 406 -> 417; two threads 850 -> 849 / 714 -> 719, 792 -> 819 / 590 -> 625, 854
#: -> 877 / 811 -> 841; bf16 GFLOP/s, one thread: 206 -> 207 / 194 -> 195, 217 -> 221 /
#: 190 -> 196, 215 -> 222 / 214 -> 221
A_IN_PLACE: dict[str, frozenset[int]] = {"znver4": frozenset({4})}
#: the register tile of the panel order (one row block, B's panels streamed) where A's
#: rows are read in place (`A_IN_PLACE`). znver4, f32, one thread, 8x48 with A packed ->
#: 4x48 with A in place, two runs each, alternating processes: `loom-bench --shapes`
#: loom/numpy 128^3 1.00, 1.01 -> 1.07, 1.08; 256^3 1.04, 1.01 -> 1.07, 1.07; 127x255x511
#: 1.11, 1.10 -> 1.16, 1.16; 100x500x300 1.01, 1.01 -> 1.06, 1.06; 197x768x768 1.05, 1.06
#: -> 1.08, 1.08; 64x3136x576 1.16, 1.18 -> 1.19, 1.19; 128x768x3072 1.15, 1.15 -> 1.16,
#: 1.16; `loom-bench --fusion`'s relu(x @ w + b), GFLOP/s: 197x768x768 107.1, 102.0 ->
#: 105.3, 108.9; 127x255x511 99.6, 100.8 -> 107.8, 108.0; 128x1024x1024 103.5, 101.9 ->
#: 103.1, 108.3; 128x768x3072 and 128x3072x768 within 1-2% either way. Two threads:
#: within the VM's noise. In one process, 5x48, 6x48, 4x64 and 4x96 ran about as fast
#: as 4x48, 2x48 and 3x48 slower (75, 81 GFLOP/s at 128x768x3072), and 8x48 with A read
#: in place slower than either.
MEASURED_PANEL_TILES: dict[str, dict[int, tuple[int, int]]] = {"znver4": {4: (4, 48)}}
#: the register tile of a matmul on a dot-product instruction (vdpbf16ps, vpdpbusd: loom-dot),
#: whose k step broadcasts a group of A per row: fewer rows, fewer broadcasts per
#: instruction. znver4, one thread, u8 x s8 GOP/s (vpdpbusd, in one process) 8x48 / 6x64
#: / 4x64: 1024^3 224 (48 leaves a 16-column copy that packs A again) / 375-405 / 411;
#: 2048^3 389 / 394 / 384; 128x3072x768 408 / 380 / 412; 197x768x768 391 / 394 / 427 (12x32
#: 225 and 8x32 210 at 1024^3; 4x96 and 5x64 no faster); bf16 GFLOP/s (vdpbf16ps) 8x48 /
#: 4x64: 193 / 216, 208 / 206, 200 / 206, 175 / 185
MEASURED_DOT_TILES: dict[str, tuple[int, int]] = {"znver4": (4, 64)}
#: the same where A is read in place (a direct convolution's windows) and MR does not
#: divide M but this tile's rows do: the rows left over would be a copy of their own that
#: reads B unpacked, all of it again. ResNet's 7x7 maps at batch 1 (M = 49), bf16 NHWC on
#: vdpbf16ps, znver4, one thread, in one process, GFLOP/s 4x64 / 7x32 / 7x48 / 5x48:
#: 3x3 C512 170 / 180 / 183 / 148, 3x3/2 C256 -> 512 185 / 190 / 193 / 159 (3x3 C64 56^2,
#: whose 3136 rows 4 divides, 226 / 223 / 204 / 94)
MEASURED_DOT_ROW_TILES: dict[str, tuple[int, int]] = {"znver4": (7, 48)}
#: the same for an f32 direct convolution, where B (the filter) is larger than L2: the
#: leftover rows' copy would stream it all from L3 or memory again. ResNet-18's 7x7 maps at
#: batch 1 (M = 49), NHWC, znver4, in one process, GFLOP/s 4x64 / 7x32 / 7x48, one thread:
#: 3x3 C512 77.1 / 90.8 / 85.6, 3x3/2 C256 -> 512 83.2 / 90.5 / 88.5; two threads: 126.2 /
#: 146.4 / 140.6, 136.0 / 146.7 / 144.0. Its 1x1/2 projection, whose 512 KiB filter fits L2:
#: 90.2 / 87.2 / 89.2 (two threads 94.0 / 89.4 / 94.5), so it keeps 4x64
MEASURED_WINDOW_ROW_TILES: dict[str, dict[int, tuple[int, int]]] = {"znver4": {4: (7, 32)}}
#: the dot-product instructions whose KC (A's sliver in L1) and NC (B's block in L3) are
#: sized by the packed element, not C's: they read their operands' own elements. znver4,
#: one thread, in one process, KC/MC/NC from C's i32 -> from the bytes: u8 x s8 2048^3
#: 1536/512/512 -> 2048/384/2048, 374-376 -> 429-433 GOP/s; bf16 1536/256/512 ->
#: 2048/256/1024, 203 -> 214 GFLOP/s. vpmaddwd's i16 pairs of widened bytes keep C's
#: (znver3: its KC doubled ran 2048^3 at 0.95-0.97x), and so do a direct convolution's
#: windows read in place (bf16 3x3 C512 7^2 NHWC: KC 872 -> 1536, 192 -> 182 GFLOP/s;
#: int8 401 -> 396 GOP/s; the layers whose K fits one block alike)
SIZED_BY_PACKED = ("vdpbf16ps", "vpdpbusd")


def register_tile(target: Target, element_bytes: int = FLOAT, windows: bool = False,
                  dot: bool = False) -> tuple[int, int]:
    """(MR, NR) for elements of `element_bytes` (f32 by default): the tile measured on the
    target's CPU (`MEASURED_TILES`, or `MEASURED_WINDOW_TILES` for a matmul whose A is a
    direct convolution's windows, or `MEASURED_DOT_TILES` for one on a dot-product
    instruction, `dot`, when it fits its registers), else the rule.
    A tile fits when its MR*nv accumulators, nv vectors of B and one
    broadcast of A fit the registers (MR*nv + nv + 1 <= registers), and keeps the fma
    units busy when it loads at most one vector per fma ((MR + nv) / (MR*nv) <= 1: 14x8
    on AVX2 would be broadcast-bound). Of those, the one whose k step reads the fewest
    bytes per fma, (MR + NR) / (MR*NR): the fewer bytes move from L1 (and from L2, the
    B panels streaming through it) per fma. AVX2 (16 x 8 lanes): 6x16 (4x24 reads 27%
    more); AVX-512 (32 x 16 lanes): 14x32."""
    w, regs = target.lanes(element_bytes), target.vector_registers
    measured = (MEASURED_DOT_TILES.get(target.cpu) if dot else
                (MEASURED_WINDOW_TILES if windows else MEASURED_TILES).get(target.cpu, {}).get(element_bytes))
    if measured is not None and measured[1] % w == 0:
        mr, nv = measured[0], measured[1] // w
        if mr * nv + nv + 1 <= regs:
            return measured
    best: tuple[float, int, int] | None = None
    for nv in range(1, regs):
        mr = (regs - 1 - nv) // nv
        if mr < 1:
            break
        if mr + nv > mr * nv:
            continue
        footprint = (mr + nv * w) / (mr * nv * w)
        if best is None or footprint < best[0] - 1e-9:
            best = (footprint, mr, nv * w)
    if best is None:  # too few registers for any tile that is not load-bound
        return 1, w
    return best[1], best[2]


def _fit(extent: int, budget: int, multiple: int) -> int:
    """The largest multiple of `multiple` that is at most `budget`, clamped to `extent`
    rounded up to a multiple, and never below `multiple` itself: a budget smaller than
    one multiple, or an extent of 0, still gives `multiple`."""
    size = max(multiple, budget // multiple * multiple)
    return max(multiple, min(size, -(-extent // multiple) * multiple))


def _even_blocks(extent: int, size: int, multiple: int) -> int:
    """`size`, or a smaller multiple of `multiple` that splits `extent` into equal blocks
    (no more than twice as many): 3072 columns in blocks of at most 1344 become 4 of 768
    (not 1344, 1344, 384), so every block packs whole panels, provably (the copy of a
    panel that may be partial has a masked path, which keeps loom-parallelize off it)
    and takes as long as the others."""
    if extent <= size or extent % multiple:
        return size
    panels = extent // multiple
    least = -(-extent // size)
    for blocks in range(least, 2 * least + 1):
        if panels % blocks == 0:
            return panels // blocks * multiple
    return size


def plan_matmul(m: int, n: int, k: int, target: Target, element_bytes: int = FLOAT,
                in_place: str = "", panels: bool = False, threads: int = 1, a_rows: bool = True,
                packed_bytes: int | None = None, dot: str = "", b_panel: bool = False,
                windows_bytes: int = 0) -> MatmulPlan:
    """The plan for C[M,N] += A[M,K] B[K,N]; `in_place` ("A", "B"): an operand that is
    not a matrix a copy can pack (loom-direct-conv's windows), so only the other is;
    `panels`: the panel order may be chosen (the packing and its fusion not left out),
    and is where the rows fit one block and the panels split evenly over `threads`;
    `a_rows`: A's rows are contiguous (unit stride along k), so that a plan may read them
    in place (`A_IN_PLACE`; the panel order then with `MEASURED_PANEL_TILES`' tile);
    `packed_bytes`: the size of A's packed elements where it is not C's (a dot-product
    layout's i16 or bytes), which sizes A's block in L2 (MC); `dot`: the dot-product
    instruction the register tile runs on (`MEASURED_DOT_TILES`; `SIZED_BY_PACKED`);
    `b_panel`: B is one panel of a filter packed ahead of time (K x N, contiguous: an NHWC
    direct convolution's matmul per panel, `loom.conv2d`'s filter in panels), read in
    place with A's windows, nothing packed, with the register tile of the whole filter's
    rows (`MEASURED_WINDOW_ROW_TILES`); `windows_bytes`: the size of the staged input whose
    windows are A (in place), which the panel order reads again per panel."""
    plan = _plan_matmul(m, n, k, target, element_bytes, in_place == "A", packed_bytes or element_bytes, dot,
                        b_panel)
    if b_panel and plan.rows_tiled:
        return replace(plan, in_place=in_place, mc=_fit(m, m, plan.mr), pack=False,
                       why_no_pack="B is a panel of the filter, packed ahead of time (contiguous)")
    a_in_place = a_rows and not in_place and element_bytes in A_IN_PLACE.get(target.cpu, ())
    # the panel order's own tile, where one was measured
    tile = MEASURED_PANEL_TILES.get(target.cpu, {}).get(element_bytes) if a_in_place else None
    own = (replace(plan, pack_a=False) if a_in_place and dot else  # (the instruction's own tile)
           replace(plan, mr=tile[0], nr=max(1, min(tile[1], n)), pack_a=False)
           if tile is not None and m >= tile[0] else plan)
    nr = own.nr
    # on several threads, as many whole panels for each: blocks of unequal width would
    # leave the copies a width they cannot prove (a masked copy, not fused), and a thread
    # idle (65 panels on 2 threads: 0.74x the order of row tiles, 64 panels: 1.21x)
    even = threads == 1 or (n % nr == 0 and (n // nr) % threads == 0)
    # a direct convolution's windows (A in place) too, on the plain fmas (the module's doc)
    windows = in_place == "A" and not dot and windows_bytes <= target.l2 // 2
    if panels and plan.pack and plan.rows_tiled and (not in_place or windows) and m <= plan.mc and even:
        # NC: the columns of a thread; then a k block's working set in L2: A's block,
        # B's panel and, when K is split, the thread's part of C, which every k block
        # reads and writes again
        nc = -(-n // nr) * nr // threads
        kc, e = plan.kc, element_bytes
        while plan.k > kc and kc > 64 and (m * kc + kc * nr + m * min(n, nc)) * e > 3 * target.l2 // 4:
            kc //= 2
        return replace(own, panels=True, nc=nc, kc=kc, in_place=in_place, pack_a=own.pack_a and not windows)
    if in_place == "A":  # nothing to pack per row block: one block, all of it the threads' to share
        plan = replace(plan, in_place=in_place, mc=_fit(m, m, plan.mr))
    elif in_place:
        plan = replace(plan, in_place=in_place)
    elif a_in_place and plan.rows_tiled:
        # with A in place the loop over the row blocks runs in parallel (the packing of A
        # kept it serial, and the threads shared each block's row tiles instead): equal
        # blocks (512^3 on two threads in blocks of 384 and 128 rows, one thread idle half
        # of the time: 0.73x numpy; in 2 blocks of 256, 1.08-1.19x), and A read in place on
        # several threads only where the blocks split evenly over them, else packed (1000^3
        # in 5 blocks of 200 on 2 threads ran 0.84-0.89x numpy with A in place, 0.94-0.99x
        # packed)
        mc = _even_blocks(m, plan.mc, plan.mr)
        plan = replace(plan, mc=mc, pack_a=not (threads == 1 or (m % mc == 0 and (m // mc) % threads == 0)))
    return plan


def _plan_matmul(m: int, n: int, k: int, target: Target, element_bytes: int, windows: bool,
                 packed_bytes: int, dot: str, b_panel: bool = False) -> MatmulPlan:
    e = element_bytes
    mr, nr = register_tile(target, e, windows, bool(dot))
    rows = (MEASURED_DOT_ROW_TILES.get(target.cpu) if dot else
            MEASURED_WINDOW_ROW_TILES.get(target.cpu, {}).get(e) if k * n * e > target.l2 or b_panel else None)
    if windows and m % mr and rows is not None and m % rows[0] == 0 and rows[1] % target.lanes(e) == 0:
        mr, nr = rows
    w = target.lanes(e)
    accumulators = mr * -(-nr // w)
    # a narrow matmul (a peeled copy's last columns): its own width, one panel; extents of
    # 0 (loom-default does not schedule such a nest) still give a plan, of sizes >= 1
    nr = max(1, min(nr, n))
    if dot and nr == n and n > w:  # whole vectors, the dot product's columns (loom-dot); the rest peeled
        nr = n // w * w
    if dot and nr % w == 0 and nr // w * mr < accumulators and m % (accumulators // (nr // w)) == 0:
        # a narrow matmul on a dot-product instruction (whole vectors: the dot path): as many
        # accumulators as the measured tile, in more rows, for the instructions' latency
        # (bf16 32768x16x27, a 3-channel conv's im2col, znver4, one thread: 4x16, 4
        # accumulators, 20 GFLOP/s; 16x16, 56), where they divide the rows (a copy of the
        # rows left over would split the register tile's writes of C, which a fused
        # epilogue then cannot tell apart)
        mr = accumulators // (nr // w)
    # the bytes of A's sliver and B's block: packed where A is
    sized = packed_bytes if dot in SIZED_BY_PACKED and not windows else e
    kc = max(1, min(k, max(8, 3 * target.l1 // 4 // (mr * sized) // 8 * 8)))
    if sized != e:  # k blocks of one size (2048 in 1536 + 512 left the last block a third as long)
        kc = min(k, -(-k // -(-k // kc) // 8) * 8)
    elif windows:
        # a direct convolution's windows: K in blocks of one size where up to twice the
        # fewest blocks divide it in multiples of 8. The k loop of a last, shorter block has
        # a bound of min(k_t + KC, K); inlined in the kernel, with the windows' k floordiv
        # (S*C) in its reads, LLVM's loop strength reduction then gave the one-thread
        # micro-kernel an induction variable per row of A and spilled accumulators: znver3,
        # one thread, one process, interleaved, 3x3 C128 28^2 (K = 1152: 1024 + 128 -> 576 +
        # 576) 9.06 -> 3.64 ms, 3x3/2 C128 -> 256 3.99 -> 2.00, 3x3/2 C256 -> 512 5.32 ->
        # 4.25; 3x3 C256 14^2 (K = 2304 in 768s) and 3x3 C512 7^2 in panels 0.99-1.04x (on
        # two threads the row tiles run in a function of their own: both plans 1.55 ms)
        kc = _even_blocks(k, kc, 8)
    # A's block in L2, of its packed elements: i16 pairs (vpmaddwd) let it hold twice the
    # rows of i32 (u8 x s8 197x768x768, znver3, one thread: MC 126 -> 192, 1.08-1.12x; KC
    # doubled as well: 2048^3 0.95-0.97x, so KC stays sized by C's element)
    mc = _fit(m, 3 * target.l2 // 4 // (kc * packed_bytes), mr)
    nc = _even_blocks(n, _fit(n, target.l3 // 8 // (kc * sized), nr), nr)
    if (m * k + k * n) * e <= target.l1:
        return MatmulPlan(m, n, k, mr, nr, max(1, m), max(1, n), max(1, k), w, False, "A and B fit in L1 together", e)
    if m < mr:  # rows of B streamed: MV_J_VECTORS vectors of C's row per step, whatever the tile
        nr = max(1, min(MV_J_VECTORS * w, n))
        return MatmulPlan(m, n, k, mr, nr, mc, nc, kc, w, False, "B is read once, a copy would only add traffic", e)
    return MatmulPlan(m, n, k, mr, nr, mc, nc, kc, w, True, "", e,
                      packed_bytes=packed_bytes if packed_bytes != e else None)


def filter_panel(m: int, f: int, k: int, target: Target, element_bytes: int = FLOAT, dot: str = "") -> int:
    """NR of the panels to pack a constant filter into ahead of time for an NHWC direct
    convolution of M output pixels, F output channels and K = R*S*C taps (`loom.conv2d`'s
    filter in panels), or 0 to pass it as it is (HWCF). Where the filter is larger than L2
    its schedule packs it per call, reading each panel's K rows of NR channels 4*F bytes
    apart, from memory when the filters of a model outgrow L3 (the filter gathered cold:
    ResNet-18's 3x3 C512 7^2 ran 85.8 GFLOP/s, its panels 107.3; 3x3/2 C256 -> 512 79.7
    and 105.1; two threads 152 -> 197, 142 -> 198; 3x3 C256 14^2 105.7 -> 108.6, two threads
    190 -> 212; at batch 8 3x3 C512 7^2 109.1 -> 113.4, two threads 205 -> 216; znver4, one
    process). A filter that fits L2 stays (3x3 C128 28^2, 590 KiB: 110.6 -> 113.0 on one
    thread but 208 -> 175 on two). NR is the register tile's (`plan_matmul` with
    `b_panel`), or fewer whole vectors where those do not divide F; f32 and f64, or with `dot` a
    low-precision filter in panels of groups for that dot-product instruction, which
    reads the windows in place (the caller knows: NHWC, no dilation, C whole groups).

    With `dot`, where the filter is larger than half of L2: its schedule packs it per call
    into the instruction's layout, the same gather at 2*F bytes apart (bf16, cold filters,
    one and two threads, GFLOP/s HWCF -> panels of pairs: 3x3 C512 7^2 154 -> 211 and
    127 -> 367; 3x3/2 C256 -> 512 153 -> 202 and 271 -> 381; 3x3 C256 14^2 207 -> 217 and
    360 -> 408; 3x3/2 C128 -> 256, 576 KiB: 205 -> 211 and 299 -> 325; 3x3 C128 28^2,
    288 KiB: 224 either way, and 3x3 C64 56^2 224 either way, 414 -> 401 on two; znver4)."""
    if dot:
        if k * f * element_bytes <= target.l2 // 2:
            return 0
    elif element_bytes not in (4, 8) or k * f * element_bytes <= target.l2:
        return 0
    plan = plan_matmul(m, f, k, target, 4 if dot else element_bytes, "A", b_panel=True, dot=dot)  # (C's: f32, i32)
    nr = plan.nr
    while nr > plan.lanes and f % nr:  # whole vectors dividing F (bf16 7x7 maps: 7x48 -> 7x32, 211 GFLOP/s; 7x64 167)
        nr -= plan.lanes
    return nr if plan.rows_tiled and nr % plan.lanes == 0 and f % nr == 0 else 0


#: the time one element of im2col's patch matrix costs, in fmas of its matmul, per layout:
#: written by the copy, then read and written again by the packing of B (NCHW) or A
#: (NHWC, whose matmul also has the F output channels as its columns, 64 of them a 48-wide
#: tile and a 16-wide rest on znver4). Fitted to one thread on znver4, both strategies
#: interleaved: a 3x3 C64 56^2 layer ran 86.7 GFLOP/s with im2col against 104.8 direct in
#: NCHW, 66.5 against 103.0 in NHWC (1.8M patch elements, 1/64 per fma)
IM2COL_ELEMENT_FMAS = {"nchw": 16, "nhwc": 48}
#: the direct convolution's cost over a packed matmul's, per layout. NCHW: its taps are
#: vectors loaded from the staged planes (rows and channels apart, most loads straddling
#: two cache lines), not from a packed panel in one stream, and with a stride they hop
#: between its phase planes (STRIDED_PENALTY more). Fitted to the layers where the two
#: strategies come closest (znver4, one thread, interleaved): 3x3 C128 28^2 (direct
#: 100.0, im2col 95.3 GFLOP/s: the direct's 6.8% overhang and the penalty under im2col's
#: 12.5%), stride-2 3x3 C128 (82.4, 88.1: its 3.4% overhang and both penalties over
#: 12.5%). NHWC: its taps are broadcasts, a row of pixels' addresses in registers, and
#: its layers ran as fast as a packed matmul (3x3 C64 56^2 113.1 GFLOP/s, a 1x1 C256
#: layer's plain matmul 109.7)
DIRECT_PENALTY = {"nchw": 0.04, "nhwc": 0.0}
STRIDED_PENALTY = {"nchw": 0.08, "nhwc": 0.0}


@dataclass(frozen=True)
class ConvChoice:
    """A conv2d's strategy and the estimates behind it."""

    strategy: str  # "direct" or "im2col"
    why: str


def choose_conv2d(f: int, copied: int, wasted: float, layout: str = "nchw", strided: bool = False, *,
                  direct: bool = True, im2col: bool = True, low_precision: str = "",
                  dot_in_place: str = "", padded: tuple[int, int] | None = None) -> ConvChoice:
    """Direct convolution or im2col for a conv2d of `f` output channels whose im2col
    copies `copied` patch elements (0: none, a 1x1 stride-1 conv) and whose direct
    convolution throws away the share `wasted` of its computed pixels. Each strategy's
    time is estimated over the matmul's fmas: im2col adds IM2COL_ELEMENT_FMAS[layout] per
    patch element (1/F of them per fma), the direct convolution its overhang (wasted /
    (1 - wasted); none in NHWC), DIRECT_PENALTY[layout] and, `strided`,
    STRIDED_PENALTY[layout]; the smaller wins, im2col on a tie (a copy-free pointwise conv
    is the same matmul both ways). `direct`/`im2col`: whether each may be
    chosen (at least one). `low_precision`: the input's element type where it is bf16 or
    int8: then im2col, whose packing widens each element once (and lays k out in groups
    for the dot-product instructions, loom-dot) where the direct convolution widens a
    window's element at every read of it in place. Measured (znver3, one thread, the
    layers of `loom-bench --conv`, GOP/s direct -> im2col): u8 x s8 3x3 C64 56^2 36 -> 72,
    3x3 C128 28^2 44 -> 97, the 7x7/2 stem 32 -> 62, 1x1 C64 94 -> 101; bf16 38 -> 61,
    63 -> 71, 20 -> 62, 66 -> 66; 3x3 C256 and C512 took im2col already. `dot_in_place`:
    the dot-product instruction that reads the direct convolution's windows in place, in
    groups (an NHWC window row's taps are one run of S*C elements, C whole groups; no
    dilation; loom-dot): then no element is widened either way, and the estimates decide
    (bf16 3x3 C64 56^2 NHWC, znver4, one thread: im2col 137.5 GFLOP/s, its copy and packing
    a fifth of the time; direct 212.9). `padded`: (Cp, C), the direct convolution's
    channels padded with zeros up to whole groups for that instruction: (Cp - C)/C more
    products (the 3-channel stem in pairs, a third more: bf16 7x7/2 stem at batch 8,
    znver4, one thread: im2col 1.64 ms per image, direct with 4 channels 1.40)."""
    per_element = IM2COL_ELEMENT_FMAS[layout]
    im2col_cost = per_element / f if copied else 0.0
    penalty = DIRECT_PENALTY[layout] + (STRIDED_PENALTY[layout] if strided else 0.0)
    extra = (padded[0] - padded[1]) / padded[1] if padded else 0.0
    direct_cost = wasted / (1 - wasted) + penalty + extra
    channels = f", {padded[1]} channels padded to {padded[0]} +{extra:.1%}" if padded else ""
    estimate = (f"estimated time over the matmul's: direct +{direct_cost:.1%} (the windows' overhang "
                f"{wasted:.1%} of the computed pixels, taps read in place{' across stride phases' * strided} "
                f"+{penalty:.0%}{channels}), im2col "
                + (f"+{im2col_cost:.1%} (the patch matrix, {copied / 1e6:.3g}M elements, copied and packed: "
                   f"{per_element} fmas' time each, 1/{f} per fma)" if copied else "+0% (no copy)"))
    if not direct:
        return ConvChoice("im2col", "the direct convolution not allowed here; " + estimate)
    if low_precision and im2col and not dot_in_place:
        return ConvChoice("im2col", f"{low_precision} input: im2col's packing widens each element once (in groups "
                          f"along k for a dot-product instruction), the direct convolution at every read; "
                          + estimate)
    strategy = "direct" if not im2col or direct_cost < im2col_cost else "im2col"
    if dot_in_place:
        reading = "reading" if strategy == "direct" else "would read"
        estimate = f"{low_precision} input, {dot_in_place} {reading} the windows in place, in groups; " + estimate
    return ConvChoice(strategy, "im2col not allowed here; " * (not im2col) + estimate)


#: Winograd F(m x m, 3 x 3) (loom-winograd), in the time of one fma at the peak per element:
#: the input transform per element of V (read X's tile, the sums, V written and read back
#: by the matmul's packing), the output transform per element of the products M, a filter
#: per element (U, or the direct convolution's W: read from memory and packed at every
#: call, in a model whose filters do not stay in the caches), and the filter transform per
#: element of U where the kernel computes it (not given U). Fitted on znver4, one thread,
#: ResNet-18's 3x3 layers at batch 1 (ms per nest, `compile(profile=True)`, and per layer
#: in the model, `loom-bench --model resnet18 --profile`): the input transform 0.15-0.17 ns
#: per element of V, the output 0.09, the filter transform 0.16-0.20 per element of U; a
#: filter streamed from memory 0.26 ns per element beyond the matmul's fmas (3x3 C512 7^2,
#: F(2x2), in the model: 2.35 ms against 1.25 for its fmas at 93% of the peak)
WINOGRAD_ELEMENT_FMAS = {"input": 9.0, "output": 5.5, "filter": 15.0, "filter_transform": 10.0}
#: the batched matmul's speed against the direct convolution's (its alpha^2 products are
#: matmuls of P x C by C x F: 0.93 of the peak measured at 196 x 64 x 64 and 49 x 256 x 256,
#: the direct convolution's 0.97)
WINOGRAD_MATMUL_SPEED = 0.93 / 0.97
#: a matmul of fewer rows than this per product (P tiles: 4 at 7^2 with F(4x4)) streams its
#: filter past too few rows to hide the memory: its U costs WINOGRAD_FEW_ROWS times more
#: (3x3 C512 7^2, F(4x4): 3.95 ms for 0.70 of fmas)
WINOGRAD_MIN_ROWS = 8
WINOGRAD_FEW_ROWS = 2.5


@dataclass(frozen=True)
class WinogradChoice:
    """loom-winograd's choice for one conv2d: the output tile m (0: the direct convolution)."""

    tile: int
    why: str
    #: m (0: direct) -> estimated time, in fmas at the peak
    estimates: dict[int, float]


def winograd_estimate(n: int, ho: int, wo: int, c: int, f: int, m: int, target: Target, *,
                      filter_given: bool) -> float:
    """The estimated time of a Winograd F(m x m, 3 x 3) convolution (WINOGRAD_*), in fmas.
    Where the P rows of a product are not whole register tiles (P > MR, P mod MR rows
    left), the rows left over are a nest of their own after the products (loom-peel),
    which reads U again, from memory where U takes half of L3 or more: its cost then counts
    twice. 3x3 C512 7^2 at batch 1, F(2x2), has 16 rows of 16.8 MB of U: on AVX2's 6x16
    tile 12 + 4 rows; znver3, one thread, filters cold (8 rotated), one process: 10.6 ms
    against 5.6 for the direct convolution with its filter in panels. On znver4's 8x48 the
    16 rows are whole tiles (2.4 ms against 2.5)."""
    alpha2 = winograd.points(m) ** 2
    p = winograd.tile_count(n, ho, wo, m)
    cost = WINOGRAD_ELEMENT_FMAS
    mr = register_tile(target)[0]
    again = p > mr and p % mr and alpha2 * c * f * FLOAT >= target.l3 // 2
    filter_cost = cost["filter"] * (WINOGRAD_FEW_ROWS if p < WINOGRAD_MIN_ROWS else 1.0) * (2 if again else 1)
    if not filter_given:
        filter_cost += cost["filter_transform"]
    return (alpha2 * p * c * f / WINOGRAD_MATMUL_SPEED + cost["input"] * alpha2 * p * c
            + cost["output"] * alpha2 * p * f + filter_cost * alpha2 * c * f)


def choose_winograd(n: int, ho: int, wo: int, c: int, f: int, target: Target, tiles: tuple[int, ...] = (2, 4), *,
                    filter_given: bool = False) -> WinogradChoice:
    """The fastest of the direct convolution (its N Ho Wo 9 C F fmas and its filter) and Winograd with each
    tile of `tiles`, for an NHWC 3x3 stride-1 conv2d of C -> F channels and an N x Ho x Wo
    output on `target`; `filter_given`: the caller passes the transformed filter (no filter transform
    in the kernel). A tile named alone (loom-winograd{tile=m}) is taken as it is."""
    estimates = {0: 9.0 * n * ho * wo * c * f + WINOGRAD_ELEMENT_FMAS["filter"] * 9 * c * f}
    for m in tiles:
        estimates[m] = winograd_estimate(n, ho, wo, c, f, m, target, filter_given=filter_given)
    text = ", ".join(("direct" if m == 0 else f"F({m}x{m})") + f" {e / 1e6:.3g}M" for m, e in estimates.items())
    why = f"estimated time in fmas at the peak: {text}"
    best = min(estimates, key=estimates.get) if len(tiles) > 1 else tiles[0]
    return WinogradChoice(best, why, estimates)
