"""Time of one coreference training step (default 4,096 subwords): longformer_base (12 layers x 768,
window 256) reading one document whole, the coarse-to-fine head with its default (Joshi et al.)
sizes, forward, backward and an Adam step, fp32 (``--bf16``: the model in bf16), on this machine's CPU. The document is synthetic:
random token ids in sentences of 24 subwords (about OntoNotes' mean) with 60 gold mentions.

    python -m longformer_experiments.coref_small.step_time [--runs 5] [--length N] [--bf16] [--write-docs]

Writes docs/results/coref_step_N.{md,json} (--out-dir: another folder; the median and range of the
runs, the load average before, and the run's provenance: the machine, the commit, the date, the
load average after). A bf16 step takes minutes on a 2-core CPU even at a few hundred subwords,
so scripts/regenerate_pages.sh leaves it out."""
import argparse
import statistics
import time

import torch

from longformer_common import quiet
from longformer_common.provenance import provenance_line
from longformer_common.results import stamped, write_page
from longformer_experiments.runner import PLUGIN, REPO, regenerate_note

MODULE = "longformer_experiments.coref_small.step_time"
PAPER_LENGTH = 4096  # the paper's coreference input length; a page at fewer says it was sized down


def build(length: int):
    from fairseq import options, tasks

    import fairseq_longformer  # noqa: F401
    from fairseq_longformer.tasks.longformer_coref import CorefDataset

    parser = options.get_training_parser()
    data = REPO / "work" / "coref_step_dict"
    data.mkdir(parents=True, exist_ok=True)
    (data / "dict.txt").write_text("".join(f"w{i} 1\n" for i in range(1000)))
    args = options.parse_args_and_arch(parser, [str(data), "--user-dir", str(PLUGIN), "--task", "longformer_coref",
                                                "--criterion", "longformer_coref", "--arch", "longformer_base",
                                                "--max-positions", "4096", "--pad-to-multiple", "512",
                                                "--dropout", "0.1", "--cpu"])
    task = tasks.setup_task(args)
    model = task.build_model(args)
    criterion = task.build_criterion(args)
    body = length - 2
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(4, 1000, (body,), generator=g)
    starts = torch.sort(torch.randperm(body - 4, generator=g)[:60]).values
    record = {"sentence": [i // 24 for i in range(body)], "word": list(range(body)),
              "speakers": [["a"] * body], "genre": "nw",
              "subword_clusters": [[[int(s), int(s) + 1] for s in starts[i::10]] for i in range(10)]}

    class Tokens(list):
        sizes = torch.tensor([body]).numpy()

    dataset = CorefDataset("train", Tokens([tokens]), [record], task.dictionary, 4096, task.global_classes, 512,
                           shuffle=False, seed=1)
    sample = dataset.collater([dataset[0]])
    return model, criterion, sample


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--length", type=int, default=4096)
    p.add_argument("--bf16", action="store_true", help="the model in bf16 (fp32 at 4,096 with these head sizes "
                                                          "needed more than this machine's 23 GB: killed twice)")
    p.add_argument("--write-docs", action="store_true", help="write coref_step_N.{md,json} into --out-dir")
    p.add_argument("--out-dir", default=str(REPO / "docs" / "results"), help="the folder of --write-docs")
    quiet.add_load_arguments(p)
    a = p.parse_args(argv)
    load_before = quiet.load_at_start(f"python -m {MODULE}", [a.out_dir if a.write_docs else None],
                                      a.load_wait, a.allow_load)
    if load_before is None:
        return 2  # refused: the machine stayed busy (the line is printed)
    model, criterion, sample = build(a.length)
    if a.bf16:
        model = model.to(torch.bfloat16)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-5)
    times = []
    for run in range(a.runs + 1):  # the first run warms up (allocations), not counted
        start = time.perf_counter()
        loss, _, _ = criterion(model, sample)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if run:
            times.append(time.perf_counter() - start)
        print(f"run {run}: {time.perf_counter() - start:.2f} s", flush=True)
    result = stamped({"length": a.length, "dtype": "bf16" if a.bf16 else "fp32", "runs": times,
                      "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times),
                      "load_before": load_before, "threads": torch.get_num_threads(), "bf16": a.bf16,
                      "runs_asked": a.runs})
    text = page(result)
    print(text)
    if a.write_docs:
        write_page(f"coref_step_{a.length}", result, text, a.out_dir)
    return 0


def page(result: dict) -> str:
    """The markdown page of a stored run (docs/results/coref_step_N.json) alone."""
    times, load_before = result["runs"], result["load_before"]
    bf16 = result["dtype"] == "bf16"
    banner = quiet.load_banner(load_before, (result.get("provenance") or {}).get("load_average"))
    text = "\n".join([
        f"# One coreference training step at {result['length']:,} subwords (CPU)", "", *([banner, ""] if banner else []),
        *([f"Sized down from the paper's {PAPER_LENGTH:,} subwords; the model and the head's sizes are the same.", ""]
          if result["length"] < PAPER_LENGTH else []),
        f"longformer_base (12 x 768, window 256, whole document in one pass) with the coarse-to-fine head at Joshi "
        f"et al.'s sizes (FFNN 3000, spans <= 30, 0.4 spans per subword, 50 antecedents, depth 2): forward, backward "
        f"and an Adam step, {'bf16' if bf16 else 'fp32'}, {result['threads']} torch threads. Median {result['median_s']:.1f} s, range "
        f"{result['min_s']:.1f}-{result['max_s']:.1f} s over {len(times)} runs (after one warm-up).", "",
        f"Load average (1, 5, 15 min) before the runs {tuple(round(x, 1) for x in load_before)}, after them as below. "
        f"{provenance_line(result.get('provenance'))}", "",
        regenerate_note(MODULE, [*(["--bf16"] if bf16 else []), "--runs", str(result.get("runs_asked", len(times))),
                                 *(["--length", str(result["length"])] if result["length"] != PAPER_LENGTH else []),
                                 "--write-docs"])]) + "\n"
    return text


if __name__ == "__main__":
    raise SystemExit(main())
