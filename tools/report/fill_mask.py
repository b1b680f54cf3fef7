"""The fill-mask demo: held-out sentences with one word masked, filled by the trained model
through fairseq's own hub interface (the registered ``longformer`` model's
``from_pretrained(...).fill_mask``).

Sentences come from a held-out split's binary (decoded with the dictionary and the
sentencepiece model), so the model never trained on them. The masked word is chosen by a fixed
rule (the last word of at least 4 letters in a line of 6 to 30 words), not by how well the model
does on it.
"""
import re
from pathlib import Path
from typing import List, Tuple

_WORD = re.compile(r"[A-Za-z]{4,}")


def held_out_sentences(data_dir: Path, split: str, count: int) -> List[Tuple[str, str]]:
    """-> [(text with one ' <mask>', the masked word)] from lines spread evenly over the split."""
    import sentencepiece as spm
    from fairseq.data import Dictionary, data_utils

    dictionary = Dictionary.load(str(Path(data_dir) / "dict.txt"))
    sp = spm.SentencePieceProcessor(model_file=str(Path(data_dir) / "spm.model"))
    dataset = data_utils.load_indexed_dataset(str(Path(data_dir) / split), dictionary)
    candidates = []
    for i in range(len(dataset)):
        pieces = dictionary.string(dataset[i]).split()
        for line in re.split(r"(?<=[.;:?!])\s+", sp.decode_pieces(pieces)):
            words = line.split()
            if 6 <= len(words) <= 30:
                hits = [m for m in _WORD.finditer(line)]
                if hits:
                    last = hits[-1]
                    candidates.append((line[:last.start()].rstrip() + " <mask>" + line[last.end():], last.group(0)))
    if not candidates:
        return []
    step = max(len(candidates) // count, 1)
    return candidates[::step][:count]


def fill_mask_demo(save_dir: Path, checkpoint: str, data_dir: Path, split: str = "valid",
                   count: int = 4, topk: int = 3) -> List[dict]:
    """-> [{"masked", "answer", "predictions": [(word, probability)]}] from the hub interface."""
    import fairseq_longformer  # noqa: F401  (registers the longformer model)
    from fairseq.models import MODEL_REGISTRY

    hub = MODEL_REGISTRY["longformer"].from_pretrained(
        str(save_dir), checkpoint_file=checkpoint, data_name_or_path=str(Path(data_dir).resolve()),
        bpe="sentencepiece", sentencepiece_model=str(Path(data_dir).resolve() / "spm.model"),
    )
    hub.eval()
    results = []
    for masked, answer in held_out_sentences(data_dir, split, count):
        filled = hub.fill_mask(masked, topk=topk)
        results.append({"masked": masked, "answer": answer,
                        "predictions": [(word.strip(), prob) for _, prob, word in filled]})
    return results
