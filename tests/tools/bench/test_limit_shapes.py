"""``matmul_limit.limit_shapes``: the matmul shapes of the limit weighted so that they stand for exactly
the layer's useful work (the count itself: tests/kernels/test_flops.py)."""
from longformer_tools import flops
from longformer_tools.bench import matmul_limit


def test_limit_shapes_stand_for_the_layers_work():
    """Forward weights add up to the forward's useful FLOPs, backward weights to twice that; the
    band shapes are the PyTorch path's (c = max(w // 4, 32), L = c + 2w)."""
    shapes = {s.name: s for s in matmul_limit.limit_shapes(1, 4096, 12, 64, 256, 8, output_projection=False)}
    counted = flops.layer_flops(1, 4096, 12, 64, 256, 8)
    assert sum(s.forward_weight for s in shapes.values()) == counted.forward
    assert sum(s.backward_weight for s in shapes.values()) == 2 * counted.forward
    assert (shapes["projection"].m, shapes["projection"].k, shapes["projection"].n) == (4096, 768, 768)
    scores = shapes["band scores"]
    assert (scores.batch, scores.m, scores.k, scores.n) == (12 * 4096 // 64, 64, 64, 64 + 512)
    mixing = shapes["band mixing"]
    assert (mixing.m, mixing.k, mixing.n) == (64, 576, 64) and scores.flops == mixing.flops
    # small windows: L rounds c + 2w up to whole chunks, as the layout does
    assert matmul_limit.band_chunk(128, 8) == (32, 64) and matmul_limit.band_chunk(64, 40) == (32, 128)
