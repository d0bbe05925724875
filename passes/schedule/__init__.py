"""Schedule passes: loop transformations over affine nests, and the pipelines built from them."""
