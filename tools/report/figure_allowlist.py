"""The reviewed figures the docs may state without a results page (``figure_check``): settings,
definitions and arithmetic, never a measurement. Each entry is the phrase around the figure as
the docs write it (whitespace collapsed) -> why it is not a measured result; a figure passes
when its sentence contains an entry that contains it. Adding one is a review decision: a timing,
a memory peak or a score belongs in docs/results/ instead.
"""

ALLOWED = {
    # settings: flags, recipes, the paper's choices
    "40% of the training": "the main job's training masking rate (--train-mask-prob 0.4)",
    "40%-masked": "the main job's training masking rate (--train-mask-prob 0.4)",
    "| 40% |": "docs/recipes.md's table of settings tried: the masking rate column",
    "| 15% |": "docs/recipes.md's table of settings tried: the masking rate column",
    "`--mask-prob`, 15%": "RoBERTa's masking rate, the flag's default",
    "standard 15%": "RoBERTa's masking rate, the flag's default",
    "15% of them masked": "the benchmark's masking rate, RoBERTa's",
    "15% masked": "the checkpointing measurement's masking rate, RoBERTa's",
    "10% of updates": "the recipes' warmup share",
    "10% warmup": "the recipes' warmup share",
    "warmup 10% of a phase": "the char-LM phases' warmup share, the paper's",
    "5% valid, 5% test": "the shares of an unsplit char-LM file kept for valid and test",
    "cut at 80% and 90%": "the paper's Hyperpartisan split 80/10/10",
    "60% of the memory available": "the benchmark workers' default memory cap",
    "4x the training length": "a test's setting: the evaluation length",
    "4x the training one": "the example command's evaluation length",
    "2-3x the BART's 256 positions": "the LED demo's passage lengths, a setting of the task",
    "3 x 2.5 s": "the retries of a failed checkpoint write: their count and wait",
    # definitions
    "chance 25%": "chance level with four choices",
    "chance is 25%": "chance level with four choices",
    "95% paired bootstrap": "the confidence level of the intervals",
    "2% correlation": "what the dropout independence test must detect, its setting",
    "forward+backward is 3x the forward": "the useful-FLOPs convention (docs/benchmarks.md)",
    "forward+backward 3x the forward": "the useful-FLOPs convention (docs/benchmarks.md)",
    "count it, 3.5x": "FlashAttention's FLOP convention, as they define it",
    "backward 2x forward": "the model-FLOPs convention of tools/bench/model_flops.py",
    "about 10x its output's rounding": "how the GPU check's tolerances were chosen",
    "under 2x the PyTorch": "the GPU check's tolerance for the Triton kernel",
    "227 KiB": "a hardware limit: the shared memory per block of sm_90",
    # arithmetic: sizes that follow from shapes, not measured
    "1 GiB of CPU buffers": "the CPU buffer pool's cap, a setting",
    "1 GiB at 16,384 characters": "a 16,384^2 fp32 mask",
    "1 GiB each at 16,384": "a 16,384^2 fp32 mask",
    "3.9 GiB at the 32,256-character evaluation": "a 32,256^2 fp32 mask",
    "8.5 GB fp16 per layer and sequence": "the band bias (heads, N, w + 1) in fp16 at the recipe's last phase",
}
