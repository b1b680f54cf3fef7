"""The fine-tuning metrics (``longformer_preprocessing.evaluation``) load where neither torch nor
fairseq is installed: light tools such as ``longformer-coref-score`` score files with them."""
import subprocess
import sys

MODULES = ("answers", "assignment", "classification", "coref", "hotpotqa")


def test_evaluation_imports_neither_torch_nor_fairseq_nor_the_plugin():
    probe = ("import sys\n"
             + "".join(f"import longformer_preprocessing.evaluation.{m}\n" for m in MODULES)
             + "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'fairseq', 'fairseq_longformer'}))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]"]
