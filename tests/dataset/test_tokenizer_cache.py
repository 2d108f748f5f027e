"""A `.gguf` tokenizer is converted once and kept in arex's cache folder: the copy loads in a fraction
of the conversion's CPU time and is the same tokenizer (vocabulary, specials, template, encodings); a
damaged copy is converted again; a changed file gets its own copy. No Docker: the bundled model's
GGUF file (installed by scripts/setup.sh with the local extra)."""

import shutil
import time

import pytest

from arex.dataset.masks import load_tokenizer, vocabulary_hash
from arex.teacher.local import find_gguf

CHAT = [
    {"role": "system", "content": "You improve a solution. <|im_end|> stays text."},
    {"role": "user", "content": "Round 1: ✓ déjà"},
    {"role": "assistant", "content": "Next step."},
]

pytestmark = pytest.mark.heavy  # one real conversion: seconds of CPU


def same(a, b) -> bool:
    return (
        vocabulary_hash(a) == vocabulary_hash(b)
        and a.chat_template == b.chat_template
        and a.all_special_ids == b.all_special_ids
        and a.added_tokens_decoder == b.added_tokens_decoder
        and a.apply_chat_template(CHAT) == b.apply_chat_template(CHAT)
        and a(CHAT[0]["content"], split_special_tokens=True)["input_ids"]
        == b(CHAT[0]["content"], split_special_tokens=True)["input_ids"]
    )


def cpu_load(spec):
    start = time.process_time()
    tokenizer = load_tokenizer(spec)
    return tokenizer, time.process_time() - start


def test_a_gguf_tokenizer_is_converted_once_and_its_copy_is_the_same_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    shutil.copy(find_gguf(), gguf)
    import gguf as _  # noqa: F401  (imports counted by neither load below)
    import transformers.integrations.ggml as _  # noqa: F401, F811

    converted, conversion_cpu = cpu_load(gguf)
    [copy_folder] = (tmp_path / "cache" / "tokenizers").iterdir()
    cached, cached_cpu = cpu_load(gguf)
    assert cached.name_or_path == str(copy_folder) and converted.name_or_path != str(copy_folder)
    assert same(converted, cached) and cached.arex_name == "model"
    assert cached_cpu < conversion_cpu / 3, (cached_cpu, conversion_cpu)
    # a damaged copy is converted again, not trusted
    (copy_folder / "tokenizer.json").write_text("{not json")
    again = load_tokenizer(gguf)
    assert same(again, converted) and again.name_or_path != str(copy_folder)
    assert same(load_tokenizer(gguf), converted)  # and the repaired copy serves the next load
    # a file changed in place is another tokenizer's file: its own copy
    gguf.touch()
    load_tokenizer(gguf)
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 2
