"""Reading a Hugging Face checkpoint directory's weight files (``model.safetensors``, or the
shards its index names) as NumPy arrays, without ``safetensors``' framework bindings or
``torch``. Pickled weights are refused, never loaded."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
PICKLE_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")

def _weight_files(hf_dir: Path) -> list[Path]:
    single = hf_dir / WEIGHTS_FILE
    if single.is_file():
        return [single]
    index = hf_dir / WEIGHTS_INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{index}: not a safetensors index ({e})") from None
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index}: 'weight_map' must map tensor names to file names")
        return [_shard_path(hf_dir, index, f) for f in sorted(set(map(str, weight_map.values())))]
    for name in PICKLE_FILES:
        if (hf_dir / name).is_file():
            raise ValueError(
                f"{hf_dir / name}: refusing to load a PyTorch pickle checkpoint (unpickling "
                "can run arbitrary code); albertkit reads only model.safetensors. Convert it "
                "once, in an environment where you trust the file, with PyTorch installed: "
                'python -c "from transformers import AutoModel as M; '
                f"M.from_pretrained('{hf_dir}').save_pretrained('{hf_dir}-safetensors')\" "
                "(save_pretrained writes safetensors), or download the model.safetensors the "
                "Hub usually offers next to the .bin"
            )
    raise FileNotFoundError(f"{hf_dir}: no {WEIGHTS_FILE} (nor {WEIGHTS_INDEX_FILE})")


def _shard_path(hf_dir: Path, index: Path, name: str) -> Path:
    """``hf_dir / name`` for a shard named in the index, refused unless it stays inside
    ``hf_dir``: a downloaded index must not make us read weights from anywhere else."""
    rel = Path(name)
    if not name or rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"{index}: shard file name {name!r} is absolute or contains '..'; "
                         f"shards must be files inside {hf_dir}")
    path = hf_dir / rel
    if not path.resolve().is_relative_to(hf_dir.resolve()):
        raise ValueError(f"{index}: shard file {name!r} resolves outside {hf_dir} "
                         "(a symbolic link?); shards must be files inside the model folder")
    return path


def _read_bf16(path: Path, name: str) -> np.ndarray:
    # numpy has no bfloat16: read the raw little-endian 16-bit words from the file layout
    # (8-byte header length, JSON header, data; https://github.com/huggingface/safetensors)
    with open(path, "rb") as fh:
        header_len = int.from_bytes(fh.read(8), "little")
        info = json.loads(fh.read(header_len))[name]
        start, end = info["data_offsets"]
        fh.seek(8 + header_len + start)
        words = np.frombuffer(fh.read(end - start), dtype="<u2")
    return (words.astype(np.uint32) << 16).view(np.float32).reshape(info["shape"])


def read_safetensors(path: str | os.PathLike) -> Iterator[tuple[str, np.ndarray]]:
    """Yield ``(name, array)`` pairs of a safetensors file (bfloat16 widened to float32)."""
    from safetensors import safe_open

    path = Path(path)
    with safe_open(str(path), framework="numpy") as f:
        for name in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
            if f.get_slice(name).get_dtype() == "BF16":
                yield name, _read_bf16(path, name)
            else:
                yield name, f.get_tensor(name)


def _normalise_hf_names(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Bring older / base-model checkpoints to the task-model names ``hf_weight_map`` uses."""
    out: dict[str, np.ndarray] = {}
    bare = not any(k.startswith("albert.") for k in tensors)  # saved from AlbertModel
    for name, value in tensors.items():
        if bare and name.startswith(("embeddings.", "encoder.", "pooler.")):
            name = f"albert.{name}"
        if name.endswith(".gamma"):  # TF-era LayerNorm names
            name = name[: -len("gamma")] + "weight"
        elif name.endswith(".beta"):
            name = name[: -len("beta")] + "bias"
        out[name] = value
    # The decoder is tied: its weight IS the word embeddings, its bias IS predictions.bias.
    if "predictions.bias" not in out and "predictions.decoder.bias" in out:
        out["predictions.bias"] = out["predictions.decoder.bias"]
    out.pop("predictions.decoder.bias", None)
    out.pop("predictions.decoder.weight", None)
    out.pop("albert.embeddings.position_ids", None)  # a buffer, not a weight
    return out
