"""What every learning check shares: a small Longformer fine-tuned from scratch by fairseq-train
with validation every few updates (the learning curve is read back from its log), and the load
average sampled while training runs (a page whose training saw a busy machine says so)."""
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from longformer_experiments.runner import PLUGIN, run

BIN = Path(sys.executable).parent
BUSY_LOAD = 3.0  # a load average above this during training marks the page (2 cores: others ran too)
VALID_LINE = re.compile(r"valid on '([\w]+)' subset")


@dataclass
class Model:
    """The encoder trained from scratch: small enough to learn within minutes on 2 CPU cores."""
    layers: int = 2
    dim: int = 64
    heads: int = 4
    window: int = 16
    positions: int = 512

    def flags(self) -> List[str]:
        return ["--arch", "longformer_base", "--encoder-layers", str(self.layers), "--encoder-embed-dim",
                str(self.dim), "--encoder-ffn-embed-dim", str(2 * self.dim), "--encoder-attention-heads",
                str(self.heads), "--attention-window", str(self.window), "--max-positions", str(self.positions),
                "--pad-to-multiple", str(self.window)]


def fine_tune(data: Path, task: str, log: Path, model: Model, *, updates: int, batch_size: int, lr: float,
              seed: int, validate_every: int, extra: Sequence[str] = (), save_dir: Optional[Path] = None) -> str:
    """fairseq-train ``task`` (and its criterion of the same name) on ``data``, validating every
    ``validate_every`` updates and after the last; the log's text. ``save_dir``: keep the last
    checkpoint there (else nothing is saved)."""
    cmd = [str(BIN / "fairseq-train"), str(data), "--user-dir", str(PLUGIN), "--task", task, "--criterion", task,
           *model.flags(), "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-6",
           "--weight-decay", "0.01", "--clip-norm", "1.0", "--lr", str(lr), "--lr-scheduler", "polynomial_decay",
           "--total-num-update", str(updates), "--warmup-updates", str(max(1, updates // 10)),
           "--max-update", str(updates), "--batch-size", str(batch_size), "--dropout", "0",
           "--attention-dropout", "0", "--seed", str(seed), "--cpu", "--num-workers", "0",
           "--validate-interval", "100000", "--validate-interval-updates", str(validate_every),
           "--max-epoch", "100000", "--log-format", "simple", "--log-interval", str(max(1, validate_every))]
    # every run its own --save-dir, even unsaved: fairseq-train locks the folder (default ./checkpoints)
    cmd += ["--save-dir", str(save_dir or log.with_suffix(".checkpoints"))]
    if save_dir is not None:
        drop_stale_checkpoints(save_dir)
    cmd += ["--no-save"] if save_dir is None else ["--no-epoch-checkpoints"]
    return run(f"{task} seed {seed}", [*cmd, *extra], log, threads=1)


def drop_stale_checkpoints(save_dir: Path) -> None:
    """Remove the checkpoints an earlier run of the check left in its own ``save_dir``: fairseq-train
    resumes from a checkpoint_last.pt it finds there, so a rerun would silently continue the old
    run's weights (and its design, if the check changed since) instead of training from scratch."""
    for stale in Path(save_dir).glob("checkpoint*.pt"):
        stale.unlink()


def curve(log: str, metric: str, subset: str = "valid") -> List[Tuple[int, float]]:
    """(update, value) of ``metric`` at every validation of ``subset`` in a fairseq-train log,
    in order, one per update (a repeated validation at the same update keeps the last)."""
    points: Dict[int, float] = {}
    for line in log.splitlines():
        found = VALID_LINE.search(line)
        if not found or found.group(1) != subset:
            continue
        value = re.search(rf"\| {re.escape(metric)} (-?[\d.]+)", line)
        update = re.search(r"\| num_updates (\d+)", line)
        if value and update:
            points[int(update.group(1))] = float(value.group(1))
    if not points:
        raise RuntimeError(f"no validation {metric} on {subset} in the training log:\n" + log[-3000:])
    return sorted(points.items())


class LoadSampler:
    """The 1-minute load average sampled every ``every`` seconds while a ``with`` block runs
    (training): its peak and mean, for the page."""

    def __init__(self, every: float = 5.0):
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> Dict[str, float]:
        samples = self.samples or [os.getloadavg()[0]]
        return {"max": round(max(samples), 2), "mean": round(sum(samples) / len(samples), 2),
                "samples": len(samples)}


def timed(function, *args, **kwargs) -> Tuple[object, float]:
    """``function(*args, **kwargs)`` and the seconds it took."""
    started = time.time()
    result = function(*args, **kwargs)
    return result, round(time.time() - started, 1)
