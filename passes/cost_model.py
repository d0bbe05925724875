"""The cost model behind the `default` pipeline: register tile, cache tiles and packing for
a matmul C[M,N] += A[M,K] B[K,N] on a target (compiler/target.py), and the traffic that
schedule moves between memory levels, so that `--remarks` can say why.

The schedule is BLIS's (Goto's) loop nest, as loom's passes build it:

    for j_t in N step NC            B block KC x NC (L3)
      for k_t in K step KC          pack B[k_t:+KC, j_t:+NC] as NC/NR panels KC x NR
        for i_t in M step MC        pack A[i_t:+MC, k_t:+KC] as MC/MR panels KC x MR (L2)
          for j_r in NC step NR     one B panel KC x NR stays in L1
            for i_r in MC step MR   C[i_r:+MR, j_r:+NR] in MR*NR/w vector registers
              for k in KC           MR broadcasts of A, NR/w vector loads of B, MR*NR/w fmas

Register tile: NR = nv*w (w lanes per vector); MR*nv accumulators, nv vectors of B and one
broadcast of A live at once (loom-unroll-jam groups the copies by row, so one broadcast is
live at a time): MR*nv + nv + 1 <= registers (see `register_tile` for the choice among
those). L1 -> register traffic is n^3/NR (A, broadcasts) + n^3/MR (B, in elements) for
n^3 fmas. AVX2 (16 registers): 6x16; AVX-512 (32): 14x32.

Cache tiles, from the sizes: KC so that one B panel (KC x NR floats) fills L1 (it is
reused by all MC/MR A panels while they stream from L2); MC so that the packed A block
(MC x KC) takes 3/4 of L2, a multiple of MR (the rest holds the B panel in use, the next
one and C's lines; each MC block streams the whole B block from L3 again, so fewer,
larger blocks move less); NC so that the packed B block (KC x NC) is four times L2 (it
lives in L3; each NC block packs A again, so a larger NC packs A less, while a smaller
block keeps B's panels closer: measured at 2048^3, NC=512 and 1024 ran 0.91-0.97x numpy
and NC=2048 0.84-0.95x; 128x768x3072 went from 0.69-0.79x at NC=512 to 0.86x at
NC=768), a multiple of NR. Each clamped to the (peeled) extent. Measured on the znver3
host (32 KiB L1d, 512 KiB L2): KC=512 beat KC=256/384/768/1024; MC, interleaved with
numpy in one process, 2-4 runs each (2048^3 and 1024^3, with loom-prefetch): MC=96
0.96-0.98x, 126 0.97x, 144 0.97-1.01x, 192 0.99-1.00x; at 197x768x768 192 ran 0.985x
against 96's 0.949x, at 127x255x511 1.016x against 0.986x (`loom-bench --ablation`
shows what each step of the schedule is worth).

Operands that fit in L1 together (64^3) are not packed: the copies would cost more than
the strided reads they save. A matmul with fewer rows than MR (a matrix-vector product,
1 x 4096 x 4096) is memory-bound: no packing either (B is read once anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.target import Target

FLOAT = 4  # bytes of f32 (f64: 8; plans take the element size)


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

    @property
    def rows_tiled(self) -> bool:
        """Whether the MR x NR register tile applies; with fewer rows than MR the matmul
        is a (few-)row-vector times matrix product, scheduled as rows of B streamed."""
        return self.m >= self.mr

    def traffic(self) -> dict[str, float]:
        """Elements moved per memory level boundary for the whole matmul (estimates)."""
        m, n, k = self.m, self.n, self.k
        flops = m * n * k
        n_blocks = -(-n // self.nc)
        k_blocks = -(-k // self.kc)
        m_blocks = -(-m // self.mc)
        if not self.rows_tiled:  # B streamed once; C's rows read and written per 4 k
            return {"DRAM->L3": k * n + m * k + m * n, "L2->L1": k * n + m * k + 2 * m * n * k / 4,
                    "L1->registers": flops + 2 * flops / 4}
        return {
            # packing reads A once per NC block and B once; C is read and written per KC block
            "DRAM->L3": m * k * n_blocks + k * n + 2 * m * n * k_blocks,
            # A panels stream from L2 once per B panel; B panels come from L3 once per MC block
            "L2->L1": flops / self.nr + k * n * m_blocks,
            # broadcasts of A and vector loads of B (in elements)
            "L1->registers": flops / self.nr + flops / self.mr,
        }

    def describe(self) -> str:
        if not self.rows_tiled:
            words = [f"{self.m} row{'s' * (self.m != 1)} < MR={self.mr}: rows of B streamed once (loop order "
                     f"k, i, j), k unroll-jammed by 4, j in {self.lanes}-lane vectors"]
        else:
            words = [
                f"register tile {self.mr}x{self.nr} ({self.mr * self.nr // self.lanes} accumulators of "
                f"{self.lanes} lanes)",
                f"cache tiles MC={self.mc} NC={self.nc} KC={self.kc}",
            ]
        if self.pack:
            words.append(f"packed A {self.mc}x{self.kc} ({self.mc * self.kc * self.element_bytes // 1024} KiB, L2), "
                         f"B {self.kc}x{self.nc} ({self.kc * self.nc * self.element_bytes // 1024} KiB, L3), "
                         f"B panel {self.kc}x{self.nr} ({self.kc * self.nr * self.element_bytes // 1024} KiB, L1)")
        elif self.rows_tiled:
            words.append(f"no packing: {self.why_no_pack}")
        flops = self.m * self.n * self.k
        traffic = ", ".join(f"{level} {elements / 1e6:.3g}M ({elements / flops:.3g}/fma)"
                            for level, elements in self.traffic().items())
        return "; ".join(words) + f"; estimated traffic in f{8 * self.element_bytes} elements: {traffic}"


def register_tile(target: Target, element_bytes: int = FLOAT) -> tuple[int, int]:
    """(MR, NR) for elements of `element_bytes` (f32 by default). A tile fits when its MR*nv accumulators, nv vectors of B and one
    broadcast of A fit the registers (MR*nv + nv + 1 <= registers), and keeps the fma
    units busy when it loads at most one vector per fma ((MR + nv) / (MR*nv) <= 1: 14x8
    on AVX2 would be broadcast-bound). Of those, the one whose k step reads the fewest
    bytes per fma, (MR + NR) / (MR*NR): the smaller that L1 footprint, the longer the KC
    a B panel in L1 allows. AVX2 (16 x 8 lanes): 6x16 (4x24 reads 27% more); AVX-512
    (32 x 16 lanes): 14x32."""
    w, regs = target.lanes(element_bytes), target.vector_registers
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
    """The largest multiple of `multiple` that is at most `budget` (at least `multiple`),
    clamped to `extent` rounded up to a multiple."""
    size = max(multiple, budget // multiple * multiple)
    return min(size, -(-extent // multiple) * multiple)


def plan_matmul(m: int, n: int, k: int, target: Target, element_bytes: int = FLOAT) -> MatmulPlan:
    e = element_bytes
    mr, nr = register_tile(target, e)
    nr = min(nr, n)  # a narrow matmul (a peeled copy's last columns): its own width, one panel
    w = target.lanes(e)
    kc = min(k, max(8, target.l1 // (nr * e) // 8 * 8))
    mc = _fit(m, 3 * target.l2 // 4 // (kc * e), mr)
    nc = _fit(n, 4 * target.l2 // (kc * e), nr)
    if (m * k + k * n) * e <= target.l1:
        return MatmulPlan(m, n, k, mr, nr, m, n, k, w, False, "A and B fit in L1 together", e)
    if m < mr:
        return MatmulPlan(m, n, k, mr, nr, mc, nc, kc, w, False, "B is read once, a copy would only add traffic", e)
    return MatmulPlan(m, n, k, mr, nr, mc, nc, kc, w, True, "", e)
