"""``longformer-bench``'s contenders: the same weights and inputs give the same function."""
import torch

from longformer_tools.bench import contenders
from longformer_tools.bench.contenders import Case, hf_available


def test_contenders_agree_at_both_boundaries():
    """Every contender computes the same function without the output projection (HF's
    LongformerSelfAttention boundary, the default) and with it, and the second boundary is the
    first followed by the output projection."""
    impls = ["dense", "torch"] + (["hf"] if hf_available()[0] else [])
    outputs = {}
    for output_projection in (False, True):
        for impl in impls:
            case = Case(impl=impl, length=64, global_tokens=3, heads=2, head_dim=16, window=16,
                        output_projection=output_projection)
            x, _, is_global = contenders.make_inputs(case, case.length, torch.device("cpu"), torch.float32)
            weights = contenders.shared_weights(case.hidden)
            _, f = contenders.build_contender(case, torch.device("cpu"), torch.float32, weights, is_global)
            with torch.no_grad():
                outputs[impl, output_projection] = f(x)
    weight, bias = contenders.shared_weights(32)["out_proj"]
    for impl in impls:
        for output_projection in (False, True):
            torch.testing.assert_close(outputs[impl, output_projection], outputs["dense", output_projection],
                                       rtol=0, atol=1e-5)
        torch.testing.assert_close(outputs[impl, True], outputs[impl, False] @ weight.T + bias,
                                   rtol=0, atol=1e-5)


def test_attention_dropout_runs_in_every_contender():
    """At p > 0 each contender drops attention probabilities in training mode (the output moves)
    and computes the p = 0 function in eval mode."""
    impls = ["dense", "torch"] + (["hf"] if hf_available()[0] else [])
    for impl in impls:
        outputs = {}
        for p in (0.0, 0.5):
            case = Case(impl=impl, length=64, global_tokens=3, heads=2, head_dim=16, window=16, dropout=p)
            x, _, is_global = contenders.make_inputs(case, case.length, torch.device("cpu"), torch.float32)
            module, f = contenders.build_contender(case, torch.device("cpu"), torch.float32,
                                                   contenders.shared_weights(case.hidden), is_global)
            assert module.training  # built in training mode: the benchmark times dropout
            with torch.no_grad():
                outputs[p, "train"] = f(x)
                module.eval()
                outputs[p, "eval"] = f(x)
        torch.testing.assert_close(outputs[0.5, "eval"], outputs[0.0, "train"], rtol=0, atol=1e-6)
        assert (outputs[0.5, "train"] - outputs[0.0, "train"]).abs().max() > 1e-2, impl
