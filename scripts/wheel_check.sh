#!/usr/bin/env bash
# The project as a package, the way a user installs it: builds a wheel from this checkout, installs
# it WITHOUT -e into a fresh virtual environment beside the test one, and from a folder outside the
# repository runs every console script's --help and trains 2 updates with longformer-train
# (tiny data binarized with the wheel's fairseq-preprocess). Run by scripts/test.sh (so by CI)
# after scripts/install.sh; exits non-zero, naming the step, on any failure.
#   bash scripts/wheel_check.sh
# Reuses what the install left: the torch wheel pip already has (the same pinned version) and the
# fairseq-fixed wheel built once into $VENV/wheelhouse, so nothing is compiled twice. The
# repository is only read (the wheel is built from a copy); everything else goes to a temporary
# folder, removed at the end (KEEP_WHEEL_CHECK=1 keeps it). The wheel's file list is printed.
# Environment: VENV (the test venv, default .venv).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")"
if [[ "${KEEP_WHEEL_CHECK:-0}" == 1 ]]; then echo "[wheel] keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
start=$SECONDS
step() { echo "[wheel] $((SECONDS - start)) s: $*"; }
fail() { echo "[wheel] FAILED: $*" >&2; exit 1; }

[[ -x "$VENV/bin/python" && -f "$VENV/torch-constraint.txt" ]] || fail "no test environment at $VENV: run scripts/install.sh first"
fairseq_wheel=("$VENV"/wheelhouse/fairseq_fixed-0.12.3.1-*.whl)
[[ -f "${fairseq_wheel[0]}" ]] || fail "no fairseq-fixed wheel in $VENV/wheelhouse: rerun scripts/install.sh (delete $VENV/.fairseq-longformer-installed)"

step "building the wheel from a copy of the checkout (tracked and new, not ignored, files)"
mkdir -p "$WORK/src" "$WORK/dist"
git -C "$REPO" ls-files -z --cached --others --exclude-standard | "$VENV/bin/python" -c '
import os, shutil, sys
repo, dest = sys.argv[1:]
for name in sys.stdin.read().split("\0"):
    if name and os.path.isfile(os.path.join(repo, name)):  # a tracked file may be deleted
        os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
        shutil.copy2(os.path.join(repo, name), os.path.join(dest, name))
' "$REPO" "$WORK/src"
"$VENV/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/dist" "$WORK/src" \
  || fail "pip wheel could not build the project"
wheel=("$WORK"/dist/fairseq_longformer-*.whl)
step "wheel: $(basename "${wheel[0]}"), its files:"
"$VENV/bin/python" - "${wheel[0]}" "$WORK/src" <<'EOF' || fail "the wheel misses modules of the source tree (see above)"
import os, sys, zipfile
wheel, src = sys.argv[1:]
names = sorted(zipfile.ZipFile(wheel).namelist())
for name in names:
    print("    " + name)
# every module of every package folder must be in the wheel, under its import name
folders = {"common": "longformer_common", "fairseq_longformer": "fairseq_longformer", "kernels": "longformer_kernels",
           "preprocessing": "longformer_preprocessing", "tools": "longformer_tools",
           "experiments": "longformer_experiments"}
missing = []
for folder, package in folders.items():
    root = os.path.join(src, folder)
    if not os.path.isfile(os.path.join(root, "__init__.py")):
        continue
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.isfile(os.path.join(here, d, "__init__.py"))]
        for f in files:
            if f.endswith(".py"):
                relative = os.path.relpath(os.path.join(here, f), root).replace(os.sep, "/")
                if f"{package}/{relative}" not in names:
                    missing.append(f"{package}/{relative}")
print(f"    ({len(names)} files)")
if missing:
    sys.exit("missing from the wheel: " + ", ".join(missing))
EOF

step "fresh virtual environment $WORK/venv, installing the wheel (not editable)"
base_python="$("$VENV/bin/python" -c 'import sys; print(sys._base_executable)')"
"$base_python" -m venv "$WORK/venv"
py="$WORK/venv/bin/python"
pip=("$py" -m pip install --disable-pip-version-check -c "$VENV/torch-constraint.txt")
# pip's output goes to a log, shown when a step fails
pip_quiet() { "${pip[@]}" "$@" >> "$WORK/pip.log" 2>&1 || { tail -30 "$WORK/pip.log" >&2; return 1; }; }
# torch first, the same pinned version as the test venv (pip takes it from its cache or local wheels)
pip_quiet "$(cat "$VENV/torch-constraint.txt")" || fail "could not install $(cat "$VENV/torch-constraint.txt")"
pip_quiet --find-links "$VENV/wheelhouse" --only-binary fairseq-fixed "${wheel[0]}" \
  || fail "pip could not install the wheel and its dependencies"
if "$py" -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)"; then
  "$py" -m pip uninstall -y -q torchaudio 2>/dev/null || true  # a CUDA build beside a CPU torch (install.sh)
fi

run="$WORK/run"  # outside the repository: nothing may come from the checkout
mkdir -p "$run"
cd "$run"
where="$("$py" -c 'import fairseq_longformer, longformer_kernels, longformer_preprocessing as p; print(p.__file__)')"
[[ "$where" == "$WORK/venv/"* ]] || fail "longformer_preprocessing imported from $where, not from the fresh venv"
[[ "$("$WORK/venv/bin/longformer-user-dir")" == "$WORK/venv/"*/site-packages/fairseq_longformer ]] \
  || fail "longformer-user-dir printed $("$WORK/venv/bin/longformer-user-dir"), not the installed package"

scripts="$("$py" -c "from importlib.metadata import distribution as d; print(' '.join(sorted(e.name for e in d('fairseq-longformer').entry_points if e.group == 'console_scripts')))")"
step "--help of every console script: $scripts"
for script in $scripts; do
  "$WORK/venv/bin/$script" --help > "$WORK/help-$script.txt" 2>&1 \
    || { tail -20 "$WORK/help-$script.txt" >&2; fail "$script --help exited non-zero"; }
done
grep -q -- "--user-dir" "$WORK/help-longformer-train.txt" && grep -q "longformer-user-dir" "$WORK/help-longformer-train.txt" \
  || fail "longformer-train --help does not say how to name the plugin"
"$WORK/venv/bin/fairseq-train" --user-dir "$("$WORK/venv/bin/longformer-user-dir")" --help > "$WORK/help-fairseq-train.txt" 2>&1 \
  || fail "fairseq-train --user-dir \$(longformer-user-dir) --help exited non-zero"
grep -q "longformer_mlm" "$WORK/help-fairseq-train.txt" \
  || fail "fairseq-train --user-dir \$(longformer-user-dir) does not register the plugin's criterion longformer_mlm"

step "tiny corpus (2 KJV books, a sentence per line) binarized with the wheel's fairseq-preprocess"
books=("$REPO"/data/kjv/*.txt)
for split in train valid; do
  if [[ $split == train ]]; then book="${books[0]}"; else book="${books[1]}"; fi
  head -c 60000 "$book" | tr 'A-Z' 'a-z' | sed -e 's/\([.;:,?!]\) /\1\n/g' -e 's/\([.;:,?!]\)/ \1/g' | grep -v '^ *$' > "$split.txt"
done
"$WORK/venv/bin/fairseq-preprocess" --only-source --trainpref train.txt --validpref valid.txt --destdir bin \
  --nwordssrc 500 --workers 1 > preprocess.log 2>&1 || { tail -20 preprocess.log >&2; fail "fairseq-preprocess"; }

step "longformer-train: 2 updates of a tiny longformer_base, from $run"
"$WORK/venv/bin/longformer-train" bin --arch longformer_base --task longformer_mlm --criterion longformer_mlm \
  --encoder-layers 2 --encoder-embed-dim 64 --encoder-ffn-embed-dim 128 --encoder-attention-heads 4 \
  --attention-window 16 --pad-to-multiple 16 --tokens-per-sample 128 --max-positions 128 \
  --batch-size 2 --optimizer adam --lr 1e-3 --max-update 2 --cpu --save-dir ckpt --disable-validation \
  --log-format simple --log-interval 1 > train.log 2>&1 || { tail -30 train.log >&2; fail "longformer-train"; }
grep -q "num_updates=2" train.log || { tail -30 train.log >&2; fail "longformer-train did not reach 2 updates"; }
grep -q "LongformerModel" train.log || fail "longformer-train did not build a LongformerModel"
[[ -f ckpt/checkpoint_last.pt ]] || fail "longformer-train wrote no checkpoint_last.pt"
step "passed"
