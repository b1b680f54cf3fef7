"""The tools stand beside the plugin: they import only the names the plugin's and the kernels'
packages export and document (never a module inside them), and nothing in the library imports
the tools."""
import ast
from pathlib import Path

import fairseq_longformer
import fairseq_longformer.conversion
import fairseq_longformer.serving
import longformer_kernels
import longformer_kernels.hf

REPO = Path(__file__).resolve().parents[2]
LIBRARY = ("fairseq_longformer", "longformer_kernels")
# the package namespaces a tool may import from, and the list that documents each one's names
PUBLIC = {
    "fairseq_longformer": (fairseq_longformer, fairseq_longformer.__doc__.split()),
    "fairseq_longformer.conversion": (fairseq_longformer.conversion, fairseq_longformer.conversion.__doc__.split()),
    "longformer_kernels": (longformer_kernels, longformer_kernels.__all__),
    "fairseq_longformer.serving": (fairseq_longformer.serving, fairseq_longformer.serving.__all__),
    "longformer_kernels.hf": (longformer_kernels.hf, longformer_kernels.hf.__all__),  # transformers' models, accelerated
}


def absolute_imports(folder: Path):
    """(file, line, module, [imported names]) of every absolute import under ``folder``."""
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, node.lineno, alias.name, []
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                yield path, node.lineno, node.module, [alias.name for alias in node.names]


def test_tools_import_only_documented_package_names():
    seen = set()
    for path, line, module, names in absolute_imports(REPO / "tools"):
        if module.split(".")[0] not in LIBRARY:
            continue
        where = f"{path.relative_to(REPO)}:{line}"
        assert module in PUBLIC, f"{where} imports the module {module}: import a name its package exports"
        package, documented = PUBLIC[module]
        for name in names:
            assert hasattr(package, name) and name in documented, f"{where}: {module}.{name} is not a documented export"
            seen.add((module, name))
    # the tools do use the surface (the check above is not vacuous)
    assert ("fairseq_longformer", "LongformerSelfAttention") in seen
    assert ("fairseq_longformer.conversion", "extend_positions") in seen


def test_the_library_never_imports_the_tools():
    for folder in ("fairseq_longformer", "kernels", "preprocessing"):
        for path, line, module, _ in absolute_imports(REPO / folder):
            assert module.split(".")[0] != "longformer_tools", f"{path.relative_to(REPO)}:{line} imports {module}"
