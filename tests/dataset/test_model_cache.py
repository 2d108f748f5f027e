"""A `.gguf` model is dequantized once and kept in arex's cache folder: the copy loads in a fraction of
the dequantization's CPU time, holds the same weights, is not flagged as quantized (the Trainer takes
it), and casts to the dtype asked; a damaged copy is dequantized again. No Docker: the bundled
model's GGUF file (installed by scripts/setup.sh with the local extra)."""

import shutil
import time

import pytest
import torch

from arex.dataset.train import load_model
from arex.teacher.local import find_gguf

pytestmark = pytest.mark.heavy  # one real dequantization: ~17 CPU-seconds


def cpu_load(path, **kwargs):
    start = time.process_time()
    model = load_model(path, **kwargs)
    return model, time.process_time() - start


def same_weights(a, b) -> bool:
    mine, theirs = a.state_dict(), b.state_dict()
    return mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k].to(mine[k].dtype)) for k in mine)


def test_a_gguf_model_is_dequantized_once_and_its_copy_is_the_same_model(tmp_path, monkeypatch):
    from transformers.trainer_utils import validate_quantization_for_training

    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    shutil.copy(find_gguf(), gguf)
    dequantized, dequantize_cpu = cpu_load(gguf)
    [copy_folder] = (tmp_path / "cache" / "models").iterdir()
    cached, cached_cpu = cpu_load(gguf)
    assert cached.name_or_path == str(copy_folder) and dequantized.name_or_path != str(copy_folder)
    assert same_weights(dequantized, cached) and cached.dtype == torch.float32
    assert cached_cpu < dequantize_cpu / 3, (cached_cpu, dequantize_cpu)
    for model in (dequantized, cached):  # neither is refused by the Trainer as "purely quantized"
        validate_quantization_for_training(model)
        assert not getattr(model.config, "quantization_config", None)
    half, _ = cpu_load(gguf, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16 and same_weights(half, cached.to(torch.bfloat16))
    # a damaged copy is dequantized again, not trusted, and the repaired copy serves the next load
    (copy_folder / "model.safetensors").write_bytes(b"not safetensors")
    again = load_model(gguf)
    assert same_weights(again, dequantized) and again.name_or_path != str(copy_folder)
    assert same_weights(load_model(gguf), dequantized)
