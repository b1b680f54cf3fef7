"""@register_model("led"): the Longformer-Encoder-Decoder (paper, sec. 7), fairseq's BART whose
encoder layers use Longformer self-attention.

Only builders are overridden: ``build_encoder`` returns an ``LEDEncoder`` (the plugin's
``LongformerEncoder``, whose ``build_encoder_layer`` gives ``LongformerEncoderLayer``s, whose
``build_self_attention`` gives ``LongformerSelfAttention``); the decoder, its cross-attention,
beam search support (``reorder_encoder_out``) and BART's state-dict upgrades are fairseq's own.

Global attention: ``net_input["global_attention_mask"]`` (B, N), nonzero = global, when the task
gives one, reaches the encoder through ``LEDModel.forward`` (training) and fairseq's
``forward_torchscript`` (generation, which hands every ``net_input`` entry but the decoder's to
the encoder). Without one, the first source token of each row (the first non-padding token:
fairseq's translation task pads sources on the left) is global, the paper's summarization setting,
which also keeps a gradient flowing into the global projections. An all-zero mask means "no
global token".

Sequence length: the attention takes any N (it pads internally to its own chunk grid and strips
the padding), so batches need no padding to a multiple of the window; fairseq's
``--required-seq-len-multiple`` may still pad them for speed on GPU.

Sources longer than the encoder's positions (``--max-source-positions``, 16,384 for the
architectures here): the user's choice, through fairseq's translation task:
  * refuse (the default): fairseq skips too-long pairs in training (logging how many) and stops
    on them in validation and generation unless ``--skip-invalid-size-inputs-valid-test``; a
    direct call with a longer source raises ValueError;
  * truncate: ``--truncate-source`` keeps the first ``max_source_positions - 1`` tokens and
    ``</s>``; ``build_model`` logs a warning saying so.

Shapes: src_tokens (B, N); hidden states (N, B, C), as in fairseq.
"""
import logging
from typing import Optional

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.bart import BARTModel
from fairseq.models.bart.model import bart_base_architecture, bart_large_architecture
from fairseq.utils import safe_getattr
from torch import Tensor

from ..global_projections import add_missing_global_projections, copy_local_to_global
from ..modules.attention_configs import add_attention_args, attention_configs
from ..modules.encoder import LongformerEncoder
from ..modules.self_attention import LongformerSelfAttention

logger = logging.getLogger(__name__)

ENCODER_POSITIONS = 16384  # the released LED: BART's 1,024 positions copied 16 times
DECODER_POSITIONS = 1024  # BART's, unchanged
WINDOW = 512  # one-sided: Hugging Face's attention_window 1,024


def first_token_global(src_tokens: Tensor, padding_idx: int) -> Tensor:
    """(B, N) bool: True at each row's first non-padding token (left or right padding alike)."""
    first = src_tokens.ne(padding_idx).to(torch.int8).argmax(dim=1)  # the first maximum
    mask = torch.zeros_like(src_tokens, dtype=torch.bool)
    mask[torch.arange(src_tokens.shape[0], device=src_tokens.device), first] = True
    return mask


class LEDEncoder(LongformerEncoder):
    """The Longformer encoder with LED's default global token (each row's first source token)
    and an error for over-long sources that names the seq2seq flags."""

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        global_attention_mask: Optional[Tensor] = None,
        max_global_tokens: Optional[int] = None,
    ):
        """src_tokens: (B, N); global_attention_mask: (B, N), nonzero = global (None: the first
        token of each row, so at most 1 global token per row: no host read of the count);
        max_global_tokens: a bound of every row's global count, or None (``AttentionMasks``).
        Returns fairseq's encoder dict (encoder_out: [(N, B, C)])."""
        if src_tokens.size(1) > self.max_source_positions:
            raise ValueError(
                f"source of {src_tokens.size(1)} tokens is longer than the LED encoder's "
                f"{self.max_source_positions} positions: pass --truncate-source to cut sources, or "
                "keep them out (fairseq skips them in training; --skip-invalid-size-inputs-valid-test "
                "for validation and generation), or convert with a larger "
                "longformer-convert-bart --max-positions"
            )
        if global_attention_mask is None:
            global_attention_mask = first_token_global(src_tokens, self.padding_idx)
            max_global_tokens = 1
        return super().forward(src_tokens, src_lengths, return_all_hiddens, token_embeddings,
                               global_attention_mask=global_attention_mask, max_global_tokens=max_global_tokens)


@register_model("led")
class LEDModel(BARTModel):
    """BART with a Longformer encoder (sliding window + global attention), fairseq's decoder."""

    @classmethod
    def hub_models(cls):
        # BART's archive map would make from_pretrained("bart.large") fetch a BART, not an LED:
        # an LED comes from longformer-convert-bart, as a local folder.
        return {}

    @staticmethod
    def add_args(parser):
        BARTModel.add_args(parser)
        add_attention_args(parser, causal=False)  # the decoder is fairseq's: never Longformer

    @classmethod
    def build_model(cls, args, task):
        _led_defaults(args)  # checkpoints written before a flag existed still build
        positions = args.max_source_positions
        task_cfg = safe_getattr(task, "cfg", None)
        task_limit = safe_getattr(task_cfg, "max_source_positions", None)
        truncate = bool(safe_getattr(task_cfg, "truncate_source", False))
        if truncate:
            logger.warning(f"--truncate-source: sources longer than {min(positions, task_limit or positions)} "
                           "tokens are cut to their first tokens and </s>")
        if task_limit is not None and task_limit < positions:
            fate = "cut" if truncate else "skipped in training and refused in validation and generation"
            logger.warning(
                f"the task's --max-source-positions {task_limit} is below the LED encoder's {positions} "
                f"positions: longer sources are {fate}; pass --max-source-positions {positions} to use "
                "the whole encoder"
            )
        logger.info(f"LED encoder: {positions} positions, one-sided window(s) {args.attention_window}")
        return super().build_model(args, task)

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        # args: fairseq's TransformerConfig here (TransformerModel.build_model converts the
        # namespace); it keeps the flags it does not declare, --attention-* included.
        return LEDEncoder(args, src_dict, embed_tokens, attention_configs(args, "encoder"))

    def __init__(self, args, encoder, decoder):
        super().__init__(args, encoder, decoder)  # BART's random init of every Linear
        for module in self.modules():
            if isinstance(module, LongformerSelfAttention):
                copy_local_to_global(module)

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Tensor,
        prev_output_tokens: Tensor,
        features_only: bool = False,
        classification_head_name: Optional[str] = None,
        token_embeddings: Optional[Tensor] = None,
        return_all_hiddens: bool = True,
        alignment_layer: Optional[int] = None,
        alignment_heads: Optional[int] = None,
        global_attention_mask: Optional[Tensor] = None,
        max_global_tokens: Optional[int] = None,
    ):
        """BART's forward with the batch's global-attention mask (B, N) and its bound of the
        global count (``LEDEncoder.forward``) handed to the encoder. Returns the decoder's
        (logits (B, T, V), extra)."""
        if classification_head_name is not None:
            raise NotImplementedError("LED has no classification heads: fine-tune the longformer "
                                      "model (task longformer_classification) for classification")
        encoder_out = self.encoder(src_tokens, src_lengths=src_lengths, token_embeddings=token_embeddings,
                                   return_all_hiddens=return_all_hiddens,
                                   global_attention_mask=global_attention_mask,
                                   max_global_tokens=max_global_tokens)
        return self.decoder(prev_output_tokens, encoder_out=encoder_out, features_only=features_only,
                            alignment_layer=alignment_layer, alignment_heads=alignment_heads,
                            src_lengths=src_lengths, return_all_hiddens=return_all_hiddens)

    def upgrade_state_dict_named(self, state_dict, name):
        """BART's upgrades; a BART state dict's missing global projections start as copies of
        Q, K, V; a position table of another length is refused with the flag that fixes it."""
        super().upgrade_state_dict_named(state_dict, name)
        prefix = name + "." if name else ""
        add_missing_global_projections(state_dict, prefix=prefix + "encoder.layers.")
        key = prefix + "encoder.embed_positions.weight"
        ours = self.encoder.embed_positions
        if key in state_dict and ours is not None and state_dict[key].shape[0] != ours.weight.shape[0]:
            reserved = self.encoder.padding_idx + 1
            raise ValueError(
                f"the checkpoint's encoder has {state_dict[key].shape[0] - reserved} positions, this "
                f"model {ours.weight.shape[0] - reserved}: pass --max-source-positions "
                f"{state_dict[key].shape[0] - reserved} (the value longformer-convert-bart printed)"
            )


def _led_defaults(args) -> None:
    """What the LED adds to BART's defaults: the encoder's attention and the position counts."""
    args.attention_window = safe_getattr(args, "attention_window", str(WINDOW))
    args.attention_dilation = safe_getattr(args, "attention_dilation", "1")
    args.attention_impl = safe_getattr(args, "attention_impl", "auto")
    # "or": a config may hold None for "not given"
    args.max_source_positions = safe_getattr(args, "max_source_positions", None) or ENCODER_POSITIONS
    args.max_target_positions = safe_getattr(args, "max_target_positions", None) or DECODER_POSITIONS


@register_model_architecture("led", "led_base")
def led_base_architecture(args):
    """bart.base (6 + 6 layers, 768 wide) with 16,384 encoder positions and w = 512."""
    _led_defaults(args)
    bart_base_architecture(args)


@register_model_architecture("led", "led_large")
def led_large_architecture(args):
    """bart.large (12 + 12 layers, 1,024 wide) with 16,384 encoder positions and w = 512."""
    _led_defaults(args)
    bart_large_architecture(args)
