"""What lets ``fairseq-train --restore-file`` continue from a converted checkpoint: a fresh
training state, the train flags (``ConvertedCheckpoint``) and the printed command."""
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..tasks.longformer_mlm import batch_pad_multiple


def fresh_training_state(extra: Optional[Dict[str, object]] = None,
                         criterion_name: str = "LongformerMLMLoss") -> Dict[str, object]:
    """The training-state entries of a fairseq checkpoint at update 0 with no optimizer state:
    ``fairseq-train --restore-file`` then builds its own optimizer (no --reset-* flag is needed)
    and starts the data at epoch 1. ``extra``: more entries of ``extra_state`` (provenance).
    ``criterion_name``: the class fairseq records (informational: with no optimizer state saved,
    fairseq compares it with nothing)."""
    return {
        "optimizer_history": [{"criterion_name": criterion_name, "optimizer_name": "none",
                               "lr_scheduler_state": {"best": None}, "num_updates": 0}],
        "extra_state": {"train_iterator": {"epoch": 1, "iterations_in_epoch": 0, "shuffle": True, "version": 2},
                        "previous_training_time": 0.0, **(extra or {})},
        "last_optimizer_state": None,
    }


@dataclass
class ConvertedCheckpoint:
    """A checkpoint folder a converter wrote (model.pt + dict.txt), and the numbers a training command needs.
    model_dims: encoder_layers, encoder_embed_dim, encoder_ffn_embed_dim, encoder_attention_heads."""

    checkpoint: Path
    dictionary: Path
    arch: str
    attention_window: Tuple[int, ...]
    max_positions: int  # the encoder's
    model_dims: Dict[str, int]
    source: Optional[Path] = None
    copied_files: List[str] = field(default_factory=list)  # tokenizer files copied along
    dropped_keys: List[str] = field(default_factory=list)  # classification-head keys left out

    def train_flags(self) -> List[str]:
        """fairseq-train flags that build a model this checkpoint loads into: architecture, task
        and criterion, the model's sizes, the batch padding multiple and --restore-file."""
        d = self.model_dims
        return [
            "--arch", self.arch, "--task", "longformer_mlm", "--criterion", "longformer_mlm",
            "--encoder-layers", str(d["encoder_layers"]), "--encoder-embed-dim", str(d["encoder_embed_dim"]),
            "--encoder-ffn-embed-dim", str(d["encoder_ffn_embed_dim"]),
            "--encoder-attention-heads", str(d["encoder_attention_heads"]),
            "--attention-window", ",".join(str(w) for w in self.attention_window),
            "--max-positions", str(self.max_positions), "--tokens-per-sample", str(self.max_positions),
            "--pad-to-multiple", str(batch_pad_multiple(self.attention_window, self.max_positions)),
            "--restore-file", str(self.checkpoint),
        ]


def continue_command(flags: Sequence[str]) -> str:
    """The command line that continues training from a converted checkpoint."""
    return "longformer-train DATA " + " ".join(shlex.quote(str(f)) for f in flags)
