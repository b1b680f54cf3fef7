"""Train and valid BPC against updates, with the unigram baselines as lines (a PNG)."""
import logging
from pathlib import Path

from .training_log import TrainingLog
from .unigram import UnigramBaseline


def plot_bpc(log: TrainingLog, baseline: UnigramBaseline, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # no display on a training node
    # fairseq leaves the root logger at DEBUG in some entry points: keep matplotlib's font search quiet
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for kind, style in (("train", dict(color="tab:blue", alpha=0.6, lw=1)),
                        ("valid", dict(color="tab:orange", marker="o", ms=3, lw=1.5))):
        points = log.series(kind, "bpc")
        if points:
            # train BPC is scored on the training masks, whose rate may differ (--train-mask-prob)
            ax.plot(*zip(*points), label=f"{kind} BPC" + (" (training masks)" if kind == "train" else ""), **style)
    ax.axhline(baseline.cross_entropy_from_train, color="gray", ls=":", lw=1,
               label=f"train unigram on {baseline.split} ({baseline.cross_entropy_from_train:.2f})")
    ax.axhline(baseline.entropy, color="black", ls="--", lw=1,
               label=f"{baseline.split} unigram entropy ({baseline.entropy:.2f})")
    ax.axhline(baseline.entropy - 1, color="tab:green", ls="--", lw=1, label="1 bit below it")
    ax.set_xlabel("updates")
    ax.set_ylabel("bits per masked token (BPC)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)  # never a half-written PNG
    return path
