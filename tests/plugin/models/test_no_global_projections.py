"""``--no-global-projections``: global attention through the local Q, K, V (one set of weights),
checkpoints holding them once, and loading that never lets global weights overwrite them."""
import torch

from fairseq_longformer.modules.self_attention import LongformerSelfAttention
from tests.support.finetune_models import batch, task_and_model


def _attentions(model):
    return [m for m in model.modules() if isinstance(m, LongformerSelfAttention)]


def _logits(model, net_input):
    with torch.no_grad():
        return model(**net_input, features_only=True, classification_head_name="sentence_classification_head")[0]


def _load(model, state):
    state = dict(state)
    model.upgrade_state_dict(state)
    model.load_state_dict(state, strict=True)


def test_global_attention_uses_q_k_v(classification_data):
    task, separate, _ = task_and_model(classification_data, "longformer_classification")
    _, tied, _ = task_and_model(classification_data, "longformer_classification", "--no-global-projections")
    embed = tied.args.encoder_embed_dim
    for attn in _attentions(tied):
        assert attn.q_global_proj is attn.q_proj and attn.k_global_proj is attn.k_proj and attn.v_global_proj is attn.v_proj
    saved = sum(p.numel() for p in separate.parameters()) - sum(p.numel() for p in tied.parameters())
    assert saved == len(_attentions(tied)) * 3 * (embed * embed + embed)

    net_input = batch(task, "valid", [0, 1, 2])["net_input"]
    # same seed, same build: equal weights, and the separate model's Q_g, K_g, V_g start as copies
    torch.testing.assert_close(_logits(separate, net_input), _logits(tied, net_input))
    with torch.no_grad():  # trained-apart global projections: the two differ ...
        for attn in _attentions(separate):
            for glob in (attn.q_global_proj, attn.k_global_proj, attn.v_global_proj):
                glob.weight.add_(0.5 * torch.randn_like(glob.weight))
    assert not torch.allclose(_logits(separate, net_input), _logits(tied, net_input), atol=1e-4)
    with torch.no_grad():  # ... and changing the tied model's local Q moves its global rows too
        for attn in _attentions(separate):
            attn.q_global_proj.weight.copy_(attn.q_proj.weight)
            attn.k_global_proj.weight.copy_(attn.k_proj.weight)
            attn.v_global_proj.weight.copy_(attn.v_proj.weight)
    torch.testing.assert_close(_logits(separate, net_input), _logits(tied, net_input))


def test_state_dict_holds_q_k_v_once_and_loads_both_ways(classification_data):
    task, separate, _ = task_and_model(classification_data, "longformer_classification", seed=1)
    _, tied, _ = task_and_model(classification_data, "longformer_classification", "--no-global-projections", seed=2)
    net_input = batch(task, "valid", [0, 1])["net_input"]
    state = tied.state_dict()
    assert not [k for k in state if "global_proj" in k]
    assert [k for k in state if "q_proj" in k]

    # a tied checkpoint into a model with separate projections: Q_g, K_g, V_g become copies
    _load(separate, state)
    torch.testing.assert_close(_logits(separate, net_input), _logits(tied, net_input))

    # a checkpoint whose global projections differ, into a tied model: the local weights win
    with torch.no_grad():
        for attn in _attentions(separate):
            attn.q_global_proj.weight.mul_(3.0)
    wanted = {k: v.clone() for k, v in separate.state_dict().items() if ".q_proj." in k}
    _load(tied, separate.state_dict())
    for attn in _attentions(tied):
        assert attn.q_global_proj is attn.q_proj
    got = tied.state_dict()
    for key, value in wanted.items():
        assert torch.equal(got[key], value), key
