"""The attention core (longformer_kernels) is fairseq-free, and the plugin depends on it, never
the reverse."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_core_imports_without_fairseq_or_triton():
    code = ("import sys, longformer_kernels as k; "
            "k.longformer_attention; k.reference_attention; k.AttentionDropout; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('fairseq', 'fairseq_longformer', 'triton')); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_core_module_mentions_the_plugin():
    for path in (ROOT / "kernels").glob("*.py"):
        text = path.read_text()
        assert "import fairseq" not in text and "from fairseq" not in text, path
