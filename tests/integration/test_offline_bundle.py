"""scripts/offline_bundle.py, the offline install for the GPU image: what it carries, and its
refusal without a bundle. Its gather and install with the Python 3.11 wheels (the same steps the
GPU machine runs with cp312 ones) run in tests/integration/test_gpu_round.py, as gpu_round's
first stage."""
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "offline_bundle.py"


def _script():
    spec = importlib.util.spec_from_file_location("offline_bundle", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundle_holds_what_the_image_lacks():
    """What fairseq-fixed and fairseq-longformer[hf] need (from this environment's installed
    metadata, not following packages the image has) minus the image's packages is the bundle."""
    bundle = _script()
    errors = []
    image = bundle.image_packages()
    needed = bundle._requirement_closure(errors, stop_at=image)
    assert not errors
    assert "torch" in image and "transformers" in image
    assert needed - image == {bundle._key(bundle._name(s)) for s in bundle.BUNDLE} | {"fairseq-longformer"}


def test_install_without_a_bundle_says_so(tmp_path, capsys):
    assert _script().main(["install", str(tmp_path / "nowhere"), str(tmp_path / "site")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run 'gather" in err[0]
    assert not (tmp_path / "site").exists()
