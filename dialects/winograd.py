"""Winograd's minimal filtering algorithms F(m x m, 3 x 3), in the form of Lavin and Gray
("Fast Algorithms for Convolutional Neural Networks", 2016): an m x m tile of a 3 x 3
convolution's output, from the (m + 2) x (m + 2) input tile d that it reads and the
filter g, is

    Y = A^T [ (G g G^T) * (B^T d B) ] A        (* elementwise)

(m + 2)^2 multiplications where the direct way takes 9 m^2: F(2 x 2) 16 for 36, F(4 x 4)
36 for 144. The matrices interpolate at the points 0, 1, -1 (F(2)) and 0, 1, -1, 2, -2
(F(4)), and infinity; they are exact as fractions here, and the ops' numpy reference
computes with them in float64. Their entries grow with m, and so does the rounding error
of a transform computed in floating point (docs/guide/winograd.md states the bound
measured on ResNet's layers), which is why the rewrite is opt-in.
"""

from __future__ import annotations

from fractions import Fraction as Fr

Matrix = tuple[tuple[Fr, ...], ...]


def _m(rows: list[list]) -> Matrix:
    return tuple(tuple(Fr(v) for v in row) for row in rows)


#: m -> (B^T, G, A^T): (m+2) x (m+2), (m+2) x 3, m x (m+2)
MATRICES: dict[int, tuple[Matrix, Matrix, Matrix]] = {
    2: (
        _m([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
        _m([[1, 0, 0], [Fr(1, 2), Fr(1, 2), Fr(1, 2)], [Fr(1, 2), Fr(-1, 2), Fr(1, 2)], [0, 0, 1]]),
        _m([[1, 1, 1, 0], [0, 1, -1, -1]]),
    ),
    4: (
        _m([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
        _m([[Fr(1, 4), 0, 0], [Fr(-1, 6), Fr(-1, 6), Fr(-1, 6)], [Fr(-1, 6), Fr(1, 6), Fr(-1, 6)],
            [Fr(1, 24), Fr(1, 12), Fr(1, 6)], [Fr(1, 24), Fr(-1, 12), Fr(1, 6)], [0, 0, 1]]),
        _m([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
    ),
}

#: the output tile sizes Loom has matrices for
TILES = tuple(MATRICES)


def points(m: int) -> int:
    """alpha = m + 2: the input tile's side, and the number of products per dimension."""
    return m + 2


def tiles(extent: int, m: int) -> int:
    """How many m-wide output tiles cover `extent` outputs (the last one may overhang)."""
    return -(-extent // m)


def tile_count(n: int, ho: int, wo: int, m: int) -> int:
    """P: the m x m tiles of N outputs of Ho x Wo, each image's rows of tiles overhanging
    it by less than a tile (the rows of the batched matmul's products)."""
    return n * tiles(ho, m) * tiles(wo, m)
