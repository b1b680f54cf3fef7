"""The fairseq-train flags that build a model a converted checkpoint loads into, shared by the
RoBERTa converter and the Hugging Face importer."""
from pathlib import Path
from typing import List, Sequence


def model_train_flags(arch: str, layers: int, embed_dim: int, ffn_dim: int, heads: int,
                      attention_window: Sequence[int], max_positions: int, checkpoint: Path) -> List[str]:
    """Architecture, task and criterion flags, the model's sizes, and --restore-file."""
    return [
        "--arch", arch, "--task", "longformer_mlm", "--criterion", "longformer_mlm",
        "--encoder-layers", str(layers), "--encoder-embed-dim", str(embed_dim),
        "--encoder-ffn-embed-dim", str(ffn_dim), "--encoder-attention-heads", str(heads),
        "--attention-window", ",".join(str(w) for w in attention_window),
        "--max-positions", str(max_positions), "--tokens-per-sample", str(max_positions),
        "--restore-file", str(checkpoint),
    ]
