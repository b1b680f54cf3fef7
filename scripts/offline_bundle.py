"""Install fairseq and this project on a machine without network (the lent GPU machines), on top of
the torch that machine already has. Standard library only: it runs before anything is installed.

  here:   python3 scripts/offline_bundle.py gather DIR [--python-version 3.12] [--find-links WHEELHOUSE]
  there:  python3 scripts/offline_bundle.py install DIR TARGET
          export PATH=TARGET/bin:$PATH   # TARGET/bin/python: the image's packages plus fairseq and the project

``gather`` puts into DIR the wheels of fairseq-fixed and of every package that fairseq-fixed or
this project needs (``fairseq-longformer[hf]``) and the GPU image lacks (``BUNDLE``; the image's
package list is ``scripts/gpu_image_packages.txt``, read off the image), never torch, for the
target's Python (cp312 for the image, downloaded with the full manylinux flag set; with
``--find-links`` a wheel already built there, e.g. install.sh's cp311 fairseq wheel in
``$VENV/wheelhouse``, is taken instead of a download). About 21 MB for cp312.

``install`` makes TARGET a virtual environment over the running interpreter's packages and
installs those wheels and this checkout (built into a wheel from a copy; the repository is only
read) into it with ``--no-deps``, so the interpreter's own torch, numpy, transformers are used as
they are; console scripts land in TARGET/bin beside its python, where the tests look for them.
Then it checks with TARGET's python: every declared requirement of fairseq-fixed and fairseq-longformer[hf] resolves
(transitively), fairseq and the project import from TARGET and torch does not, the fairseq
extensions this project uses load (``EXTENSIONS``), and every console script of both
distributions imports. Exits non-zero with one line naming the failed step.

fairseq's compiled extensions in the cp312 wheel (built 2024-11 against another torch):
``data_utils_fast`` and ``token_block_utils_fast`` (Cython; batching and the masked-LM task's
blocks) and ``libbleu`` (plain C; fairseq-generate's BLEU) link no torch and were built against
numpy 2's C API (they import ``numpy._core``), so numpy 2.x loads them. ``libbase`` (BASE layers)
and ``libnat`` (non-autoregressive models) link libtorch with the pre-C++11 string ABI
(``std::string::_Rep``); torch 2.11/2.13 wheels use the C++11 ABI, so they cannot load (undefined
symbol ``c10::Error::Error(c10::SourceLocation, std::string)``). fairseq imports both lazily,
inside those features only, and this project uses neither: they are reported, not required.
Should a required one fail on some image, the fallback is to build fairseq-fixed from its sdist
there (``pip wheel --no-build-isolation --no-deps``, the image has cython and a compiler).
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE_PACKAGES = os.path.join(REPO, "scripts", "gpu_image_packages.txt")
FAIRSEQ = "fairseq-fixed==0.12.3.1"
# what fairseq-fixed and fairseq-longformer[hf] need and the GPU image lacks (the test
# tests/integration/test_offline_bundle.py recomputes it from the installed metadata)
BUNDLE = [FAIRSEQ, "hydra-core==1.3.2", "omegaconf==2.3.0", "antlr4-python3-runtime==4.9.3", "bitarray==3.12.3",
          "tensorboardX==2.6.5", "cffi==2.1.1", "pycparser==3.12"]
SDIST_ONLY = {"antlr4-python3-runtime"}  # no wheel on the registry: built here (pure Python, py3-none-any)
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "linux_x86_64"]  # the last: a wheel built here (install.sh's)
MAX_BUNDLE_MB = 40
# fairseq's extension modules: required (this project's code paths load them) or not (lazy imports
# of features the project never uses), with what uses them
EXTENSIONS = {
    "fairseq.data.data_utils_fast": (True, "batch_by_size: every fairseq-train batch"),
    "fairseq.data.token_block_utils_fast": (True, "TokenBlockDataset: the masked-LM and LM tasks"),
    "fairseq.libbleu": (True, "fairseq-generate's BLEU scorer"),
    "fairseq.libbase": (False, "BASE layers only (fairseq/modules/base_layer.py), not used here"),
    "fairseq.libnat": (False, "non-autoregressive models only (fairseq/models/nat), not used here"),
}
DISTRIBUTIONS = {"fairseq-fixed": [], "fairseq-longformer": ["hf"]}  # name -> extras checked


# the environment is checked as it is: nothing of the caller's PYTHONPATH (gpu_round.sh links common/,
# kernels/ and tools/ there)
_CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


class BundleError(Exception):
    """A failed step, said in one line."""


def _run(cmd, what):
    result = subprocess.run(cmd, capture_output=True, text=True, env=_CLEAN_ENV)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise BundleError(f"{what} failed (exit {result.returncode}): {' '.join(cmd[:6])} ...")
    return result.stdout


def _name(spec):
    return spec.split("==")[0]


def gather(folder, python_version="3.12", find_links=None):
    """Put the wheels of ``BUNDLE`` for CPython ``python_version`` on x86-64 Linux into ``folder``
    (created; an existing wheel of the same name is kept)."""
    os.makedirs(folder, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    binary = []
    for spec in BUNDLE:
        built = _built_wheel(find_links, spec, python_version)
        if built:  # a wheel built here before (install.sh's fairseq-fixed): no download, no compile
            shutil.copy2(built, folder)
        elif _name(spec) not in SDIST_ONLY:
            binary.append(spec)
    _run(pip + ["download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                "--implementation", "cp"] + [f for p in PLATFORMS for f in ("--platform", p)]
         + ["-d", folder] + binary, "pip download of " + " ".join(binary))
    _run(pip + ["wheel", "-q", "--no-deps", "--no-build-isolation", "-w", folder]
         + [s for s in BUNDLE if _name(s) in SDIST_ONLY], "pip wheel of " + " ".join(SDIST_ONLY))
    wheels = sorted(glob.glob(os.path.join(folder, "*.whl")))
    size = sum(os.path.getsize(w) for w in wheels) / 2 ** 20
    if size > MAX_BUNDLE_MB:
        raise BundleError(f"{folder} holds {size:.1f} MiB of wheels, over the {MAX_BUNDLE_MB} MiB that may travel")
    print(f"[bundle] {len(wheels)} wheels, {size:.1f} MiB in {folder}:")
    for wheel in wheels:
        print(f"    {os.path.basename(wheel)}")
    return wheels


def _built_wheel(find_links, spec, python_version):
    """The wheel of ``spec`` for CPython ``python_version`` in the folder ``find_links``, or None."""
    if not find_links or "==" not in spec:
        return None
    stem = _name(spec).replace("-", "_") + "-" + spec.split("==")[1]
    tag = "cp" + python_version.replace(".", "")
    found = sorted(glob.glob(os.path.join(find_links, f"{stem}-{tag}-*.whl")) + glob.glob(os.path.join(find_links, f"{stem}-py3-*.whl")))
    return found[0] if found else None


def _copy_checkout(dest):
    """This checkout's sources, without virtual environments, git data and build output, into
    ``dest`` (pip builds in the source tree: the repository stays untouched)."""
    skip = shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".*whl*",
                                  ".gpu*", "checkpoints")
    shutil.copytree(REPO, dest, ignore=skip, symlinks=True)


def install(folder, target):
    """Make ``target`` a virtual environment on top of this interpreter's packages, install the
    wheels of ``folder`` and this checkout into it (no dependencies), then ``check`` it."""
    started = time.time()
    wheels = sorted(glob.glob(os.path.join(folder, "*.whl")))
    names = {_key(os.path.basename(w).split("-")[0]) for w in wheels}
    missing = [s for s in BUNDLE if _key(_name(s)) not in names]
    if missing:
        raise BundleError(f"{folder} lacks the wheels of {', '.join(missing)}: run 'gather' first")
    if os.path.exists(target) and os.listdir(target):
        raise BundleError(f"{target} exists and is not empty: give a new folder (nothing is installed over it)")
    python = _environment_over_this_interpreter(target)
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
           "--ignore-installed", "--no-compile", "--no-cache-dir"]
    _run(pip + wheels, "installing the bundle's wheels")
    with tempfile.TemporaryDirectory() as work:
        _copy_checkout(os.path.join(work, "src"))
        _run([python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
              "--no-build-isolation", "--no-index", "-w", os.path.join(work, "dist"), os.path.join(work, "src")],
             "building this project's wheel")
        _run(pip + glob.glob(os.path.join(work, "dist", "*.whl")), "installing this project's wheel")
    print(f"[bundle] installed {len(wheels)} wheels and the project into {target} in {time.time() - started:.0f} s")
    if subprocess.run([python, os.path.abspath(__file__), "check", target], env=_CLEAN_ENV).returncode != 0:
        raise BundleError(f"the installed bundle in {target} failed its check (above)")
    print(f"[bundle] ready in {time.time() - started:.0f} s: use {python} (export PATH={target}/bin:$PATH)")


def _environment_over_this_interpreter(target):
    """A virtual environment at ``target`` (no pip of its own) that sees this interpreter's site
    folders after its own, through a .pth file: its torch, numpy, transformers and pip. (A
    ``--system-site-packages`` venv would see the base Python's packages instead, and the GPU
    image's python3 is itself a venv, /opt/torch/.venv.) Returns the environment's python."""
    import site

    _run([sys.executable, "-m", "venv", "--without-pip", target], "creating the environment")
    python = os.path.join(target, "bin", "python")
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   "reading the environment's site folder").strip()
    with open(os.path.join(purelib, "_interpreter_packages.pth"), "w") as pth:
        for folder in site.getsitepackages():  # addsitedir also runs their .pth files
            pth.write(f"import site; site.addsitedir({folder!r})\n")
    return python


def _cpu_torch():
    import torch

    return torch.version.cuda is None


def image_packages():
    """The normalized names of ``IMAGE_PACKAGES``."""
    with open(IMAGE_PACKAGES) as lines:
        return {_key(line) for line in lines if line.strip() and not line.startswith("#")}


def _key(name):
    return name.strip().lower().replace("_", "-")


def _requirement_closure(errors, stop_at=()):
    """Every distribution that ``DISTRIBUTIONS`` need, transitively, each resolved through
    importlib.metadata; an unresolved one goes to ``errors``. The requirements of a distribution
    in ``stop_at`` (normalized names: the image's, which come with theirs) are not followed."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen, todo = set(), [(name, extras) for name, extras in DISTRIBUTIONS.items()]
    while todo:
        name, extras = todo.pop()
        key = _key(name)
        if key in seen:
            continue
        seen.add(key)
        if key in stop_at:
            continue
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            if key == "torchaudio" and _cpu_torch():
                continue  # install.sh removes PyPI's CUDA build beside a CPU torch; fairseq's core never imports it
            errors.append(f"{name} is not installed (needed by fairseq-fixed or fairseq-longformer)")
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker and not any(requirement.marker.evaluate({"extra": e}) for e in extras or [""]):
                continue
            todo.append((requirement.name, sorted(requirement.extras)))
    return seen


def check(target):
    """Run in a fresh interpreter with ``target`` first on sys.path: see the module's docstring."""
    import importlib
    from importlib import metadata

    errors = []
    closure = _requirement_closure(errors)
    print(f"[bundle] requirements resolved: {len(closure)} distributions")
    import torch

    for module, must_be_in_target in (("fairseq", True), ("fairseq_longformer", True), ("longformer_kernels", True),
                                      ("hydra", True), ("torch", False)):
        where = os.path.realpath(importlib.import_module(module).__file__)
        inside = where.startswith(os.path.realpath(target) + os.sep)
        if inside != must_be_in_target:
            errors.append(f"{module} imported from {where}, {'not ' if must_be_in_target else ''}from {target}")
    print(f"[bundle] torch {torch.__version__} (CUDA {torch.version.cuda}) from the interpreter")
    for module, (required, used_by) in EXTENSIONS.items():
        try:
            importlib.import_module(module)
            status = "loads"
        except Exception as error:  # ImportError, OSError: an undefined symbol
            status = f"does not load ({type(error).__name__}: {str(error)[:160]})"
            if required:
                errors.append(f"{module} {status}: needed by {used_by}")
        print(f"[bundle] extension {module}: {status}; {used_by}")
    scripts = [entry for dist in DISTRIBUTIONS for entry in metadata.distribution(dist).entry_points
               if entry.group == "console_scripts"]
    for entry in scripts:
        try:
            entry.load()
        except Exception as error:  # noqa: BLE001 (any failure of an import is the finding)
            errors.append(f"console script {entry.name} ({entry.value}) does not import: {type(error).__name__}: {error}")
    print(f"[bundle] {len(scripts)} console scripts import: {' '.join(sorted(e.name for e in scripts))}")
    for error in errors:
        print(f"[bundle] error: {error}", file=sys.stderr)
    return 1 if errors else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("gather", help="download the wheels into DIR (here, with network)")
    p.add_argument("dir")
    p.add_argument("--python-version", default="3.12", help="the target's Python, e.g. 3.12 (the GPU image) or 3.11")
    p.add_argument("--find-links", help="a folder of wheels to take before the registry's (e.g. $VENV/wheelhouse)")
    p = commands.add_parser("install", help="install DIR's wheels and this checkout into TARGET (there, offline)")
    p.add_argument("dir")
    p.add_argument("target")
    p = commands.add_parser("check", help="check an installed TARGET (run by TARGET/bin/python)")
    p.add_argument("target")
    args = parser.parse_args(argv)
    try:
        if args.command == "gather":
            gather(args.dir, args.python_version, args.find_links)
        elif args.command == "install":
            if not os.path.isdir(args.dir):
                raise BundleError(f"no bundle folder {args.dir}: run 'gather {args.dir}' where there is network")
            install(args.dir, args.target)
        else:
            return check(args.target)
    except BundleError as error:
        print(f"[bundle] error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
