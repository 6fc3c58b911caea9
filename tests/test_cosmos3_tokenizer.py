"""Cosmos3 prompt tokenization: parity with the diffusers reference pipeline.

The reference ids come from ``Cosmos3OmniPipeline.tokenize_prompt`` called on a
stand-in object carrying the attributes it reads (templates, text tokenizer,
special-token ids, config), with a ``transformers`` tokenizer loaded from the
tiny tokenizer that ``seacache_testing/tiny_tokenizer.py`` writes.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from cosmos3 import tokenizer as tok
from seacache_testing import tiny_tokenizer as tiny

MAX_ID = 512

# Qwen3-VL-style ChatML without a default system turn (what the real Nano
# checkpoint is reported to use); written as chat_template.jinja in some tests.
PLAIN_CHATML = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_TEMPLATE_ATTRS = (
    "duration_template",
    "image_resolution_template",
    "video_resolution_template",
    "inverse_duration_template",
    "inverse_image_resolution_template",
    "inverse_video_resolution_template",
)


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ckpt")
    tiny.write_tiny_tokenizer(str(root / "text_tokenizer"))
    return root


@pytest.fixture(scope="module")
def ours(checkpoint):
    return tok.Cosmos3Tokenizer.from_folder(checkpoint)


@pytest.fixture(scope="module")
def hf_tokenizer(checkpoint):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(checkpoint / "text_tokenizer"), local_files_only=True)


@pytest.fixture(scope="module")
def pipeline_module():
    return pytest.importorskip("diffusers.pipelines.cosmos.pipeline_cosmos3_omni")


class _FakeVae:
    config = SimpleNamespace(latents_mean=[0.0], latents_std=[1.0], scale_factor_spatial=16, scale_factor_temporal=4)
    dtype = None


def _make_reference(pipeline_module, text_tokenizer):
    """A stand-in with what ``tokenize_prompt`` reads, taken from the pipeline's own ``__init__`` when possible."""
    cls = pipeline_module.Cosmos3OmniPipeline
    try:
        pipe = object.__new__(cls)
        cls.__init__(
            pipe, transformer=None, text_tokenizer=text_tokenizer, vae=_FakeVae(), scheduler=None,
            enable_safety_checker=False,
        )
        templates = {name: getattr(pipe, name) for name in _TEMPLATE_ATTRS}
        special = dict(pipe.llm_special_tokens)
        use_system = pipe.config.default_use_system_prompt
    except Exception as err:  # diffusers changed its constructor: fall back to the same strings
        warnings.warn(f"could not construct Cosmos3OmniPipeline ({err!r}); using literal templates")
        templates = {
            "duration_template": "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS.",
            "image_resolution_template": "This image is of {height}x{width} resolution.",
            "video_resolution_template": "This video is of {height}x{width} resolution.",
            "inverse_duration_template": "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS.",
            "inverse_image_resolution_template": "This image is not of {height}x{width} resolution.",
            "inverse_video_resolution_template": "This video is not of {height}x{width} resolution.",
        }
        special = {
            "start_of_generation": text_tokenizer.convert_tokens_to_ids("<|vision_start|>"),
            "eos_token_id": text_tokenizer.eos_token_id,
        }
        use_system = True
    return SimpleNamespace(
        text_tokenizer=text_tokenizer,
        llm_special_tokens=special,
        config=SimpleNamespace(default_use_system_prompt=use_system),
        **templates,
    )


@pytest.fixture(scope="module")
def reference(pipeline_module, hf_tokenizer):
    standin = _make_reference(pipeline_module, hf_tokenizer)

    def tokenize(prompt, negative_prompt, **kwargs):
        return pipeline_module.Cosmos3OmniPipeline.tokenize_prompt(standin, prompt, negative_prompt, **kwargs)

    return tokenize


def _ours_pair(ours, prompt, negative_prompt, *, frames, width, height, fps, res=True, dur=True, **kwargs):
    common = dict(
        width=width, height=height, frames=frames, fps=fps, resolution_template=res, duration_template=dur, **kwargs
    )
    cond = ours.encode(prompt, negative=False, **common)
    uncond = ours.encode(negative_prompt, negative=True, **common)
    return cond, uncond


# --------------------------------------------------------------------------
# parity with the reference pipeline
# --------------------------------------------------------------------------

CASES = {
    "video_default": ("A robot walks on the moon.", "blurry, low quality", 189, 1280, 720, 24.0, True, True, True),
    "image": ("A cat on a mat.", "blurry", 1, 1024, 768, 24.0, True, True, True),
    "fps16": ("A robot with a cat.", "static", 121, 832, 480, 16.0, True, True, True),
    "fps30": ("A video of the sea", "grainy", 93, 1280, 720, 30, True, True, True),
    "fps_fractional": ("Dusk over a city...", "noise", 189, 1280, 720, 29.97, True, True, True),
    "templates_off": ("A cat.", "blurry.", 189, 1280, 720, 24.0, False, False, True),
    "resolution_only": ("A cat.", "blurry", 189, 1280, 720, 24.0, True, False, True),
    "duration_only": ("A cat.", "blurry", 189, 1280, 720, 24.0, False, True, True),
    "image_duration_flag_ignored": ("A cat.", "blurry", 1, 512, 512, 24.0, False, True, True),
    "no_system_prompt_video": ("A robot walks.", "blurry", 189, 1280, 720, 24.0, True, True, False),
    "no_system_prompt_image": ("A robot.", "blurry", 1, 1280, 720, 24.0, True, True, False),
    "empty_negative": ("A robot walks.", "", 189, 1280, 720, 24.0, True, True, True),
    "empty_negative_image": ("A robot.", "", 1, 640, 640, 24.0, True, True, True),
    "empty_both_templates_off": ("", "", 189, 1280, 720, 24.0, False, False, True),
    "unicode": ("Ein Roboter läuft über den Mond — 月面の猫 🐱\nzweite Zeile", "模糊，低质量", 121, 1280, 704, 24.0,
                True, True, True),
    "special_token_text": ("A cat <|vision_start|> on a mat<|im_end|>", "blurry", 189, 1280, 720, 24.0, True, True,
                           True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_encode_matches_pipeline(case, ours, reference):
    prompt, negative, frames, width, height, fps, res, dur, use_system = CASES[case]
    expected = reference(
        prompt, negative, num_frames=frames, height=height, width=width, fps=fps,
        use_system_prompt=use_system, add_resolution_template=res, add_duration_template=dur,
    )
    got = _ours_pair(
        ours, prompt, negative, frames=frames, width=width, height=height, fps=fps, res=res, dur=dur,
        use_system_prompt=use_system,
    )
    assert got == tuple(expected)
    assert all(0 <= i < MAX_ID for ids in got for i in ids)


def test_pipeline_defaults_and_none_negative(ours, reference):
    # use_system_prompt=None -> the pipeline config default; negative_prompt=None -> "".
    expected = reference("A robot.", None, num_frames=189, height=720, width=1280, fps=24.0, use_system_prompt=None)
    assert _ours_pair(ours, "A robot.", "", frames=189, width=1280, height=720, fps=24.0) == tuple(expected)


@pytest.mark.parametrize("frames", [189, 1])
def test_custom_system_prompt_matches_patched_pipeline(frames, ours, reference, pipeline_module, monkeypatch):
    custom = "You write physically plausible videos. Ünïcode ok."
    monkeypatch.setattr(pipeline_module, "_SYSTEM_PROMPT_VIDEO", custom)
    monkeypatch.setattr(pipeline_module, "_SYSTEM_PROMPT_IMAGE", custom)
    expected = reference("A cat.", "blurry", num_frames=frames, height=720, width=1280, fps=24.0,
                         use_system_prompt=True)
    got = _ours_pair(ours, "A cat.", "blurry", frames=frames, width=1280, height=720, fps=24.0, system_prompt=custom)
    assert got == tuple(expected)
    # use_system_prompt=False wins over a custom prompt.
    without = _ours_pair(ours, "A cat.", "blurry", frames=frames, width=1280, height=720, fps=24.0,
                         use_system_prompt=False, system_prompt=custom)
    assert without == tuple(reference("A cat.", "blurry", num_frames=frames, height=720, width=1280, fps=24.0,
                                      use_system_prompt=False))


def test_system_prompt_constants_match_pipeline(pipeline_module):
    assert tok.SYSTEM_PROMPT_VIDEO == pipeline_module._SYSTEM_PROMPT_VIDEO
    assert tok.SYSTEM_PROMPT_IMAGE == pipeline_module._SYSTEM_PROMPT_IMAGE
    assert tok.default_system_prompt(1) == tok.SYSTEM_PROMPT_IMAGE
    assert tok.default_system_prompt(93) == tok.SYSTEM_PROMPT_VIDEO


@pytest.mark.parametrize("system", [None, "", "Custom system."])
@pytest.mark.parametrize("text", ["A cat.", "", "日本語 🐱\n\ttab", "  leading and trailing  "])
def test_encode_prompt_matches_apply_chat_template(text, system, ours, hf_tokenizer):
    messages = ([] if system is None else [{"role": "system", "content": system}]) + [{"role": "user", "content": text}]
    expected = hf_tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, add_vision_id=False, return_dict=True
    ).input_ids
    expected = list(expected) + [hf_tokenizer.eos_token_id, hf_tokenizer.convert_tokens_to_ids("<|vision_start|>")]
    assert ours.encode_prompt(text, system) == expected
    assert tiny.render_chat(ours, text, system) == hf_tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, add_vision_id=False
    )


def test_qwen2vl_template_system_turns(ours):
    # With the tiny Qwen2-VL-style template, the pipeline's system prompt gives one system turn, and
    # no system prompt still gives one: the template's own default.
    with_system = tiny.render_chat(ours, "A cat.", tok.SYSTEM_PROMPT_VIDEO)
    without = tiny.render_chat(ours, "A cat.", None)
    assert with_system.count("<|im_start|>system") == 1 and tok.SYSTEM_PROMPT_VIDEO in with_system
    assert without.count("<|im_start|>system") == 1 and "You are a helpful assistant.<|im_end|>" in without
    assert with_system.endswith("<|im_start|>assistant\n")


def test_special_token_ids(ours, hf_tokenizer):
    assert ours.eos_token == "<|im_end|>"
    assert ours.eos_token_id == hf_tokenizer.eos_token_id
    assert ours.vision_start_id == hf_tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert ours.vocab_size == len(hf_tokenizer) <= MAX_ID


# --------------------------------------------------------------------------
# template files
# --------------------------------------------------------------------------


def _copy_tokenizer(checkpoint: Path, dst: Path) -> Path:
    shutil.copytree(checkpoint / "text_tokenizer", dst)
    return dst


def test_chat_template_jinja_takes_precedence(checkpoint, tmp_path, pipeline_module):
    transformers = pytest.importorskip("transformers")
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "chat_template.jinja").write_text(PLAIN_CHATML, encoding="utf-8")
    hf = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    ours = tok.Cosmos3Tokenizer.from_folder(tmp_path)
    assert ours.chat_template == PLAIN_CHATML == hf.chat_template
    for use_system in (True, False):
        expected = pipeline_module.Cosmos3OmniPipeline.tokenize_prompt(
            _make_reference(pipeline_module, hf), "A cat.", "blurry", num_frames=189, height=720, width=1280,
            fps=24.0, use_system_prompt=use_system,
        )
        got = _ours_pair(ours, "A cat.", "blurry", frames=189, width=1280, height=720, fps=24.0,
                         use_system_prompt=use_system)
        assert got == tuple(expected)
    # Without a default system turn in the template, "no system prompt" means no system turn at all.
    assert "<|im_start|>system" not in tiny.render_chat(ours, "A cat.", None)


def test_chat_template_json_fallback(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    del config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": PLAIN_CHATML}), encoding="utf-8")
    ours = tok.Cosmos3Tokenizer.from_folder(folder)
    expected = "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
    assert tiny.render_chat(ours, "x", "s") == expected


def test_named_template_list_uses_default(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = [{"name": "tool_use", "template": "{{ raise_exception('no') }}"},
                               {"name": "default", "template": PLAIN_CHATML}]
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert tok.Cosmos3Tokenizer.from_folder(folder).chat_template == PLAIN_CHATML


def test_template_raise_exception_surfaces(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "chat_template.jinja").write_text("{{ raise_exception('bad chat: ' ~ messages[0]['role']) }}",
                                                encoding="utf-8")
    ours = tok.Cosmos3Tokenizer.from_folder(folder)
    with pytest.raises(jinja2.TemplateError, match="bad chat: system"):
        ours.encode_prompt("x", "s")


def test_template_is_sandboxed(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "chat_template.jinja").write_text("{{ messages.__class__.__mro__ }}", encoding="utf-8")
    with pytest.raises(jinja2.exceptions.SecurityError):
        tiny.render_chat(tok.Cosmos3Tokenizer.from_folder(folder), "x", None)


def test_tojson_does_not_escape_html(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "chat_template.jinja").write_text("{{ messages | tojson }}", encoding="utf-8")
    rendered = tiny.render_chat(tok.Cosmos3Tokenizer.from_folder(folder), "<b>&é</b>", None)
    assert rendered == json.dumps([{"role": "user", "content": "<b>&é</b>"}], ensure_ascii=False)


# --------------------------------------------------------------------------
# prompt templates
# --------------------------------------------------------------------------


def test_apply_prompt_templates_text():
    kwargs = dict(width=832, height=480, frames=49, fps=24)
    assert tok.apply_prompt_templates("A cat sits on a mat...", negative=False, **kwargs) == (
        "A cat sits on a mat. The video is 2.0 seconds long and is of 24 FPS. This video is of 480x832 resolution."
    )
    assert tok.apply_prompt_templates("", negative=True, **kwargs) == (
        "The video is not 2.0 seconds long and is not of 24 FPS. This video is not of 480x832 resolution."
    )
    assert tok.apply_prompt_templates("", negative=True, width=832, height=480, frames=1, fps=24) == (
        "This image is not of 480x832 resolution."
    )
    assert tok.apply_prompt_templates("A cat.", negative=False, resolution_template=False, duration_template=False,
                                      **kwargs) == "A cat."


# --------------------------------------------------------------------------
# errors and loading
# --------------------------------------------------------------------------


def test_loads_from_checkpoint_or_text_tokenizer_folder(checkpoint, ours):
    direct = tok.Cosmos3Tokenizer.from_folder(checkpoint / "text_tokenizer")
    assert direct.encode_prompt("A cat.", None) == ours.encode_prompt("A cat.", None)


def test_missing_folder_error(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match="folder not found") as info:
        tok.Cosmos3Tokenizer.from_folder(missing)
    assert str(missing) in str(info.value)


def test_missing_tokenizer_json_names_path(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError) as info:
        tok.Cosmos3Tokenizer.from_folder(tmp_path)
    message = str(info.value)
    assert str(folder / "tokenizer.json") in message
    assert "text_tokenizer/" in message and "tokenizer_config.json" in message


def test_empty_checkpoint_folder_error_names_expected_file(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        tok.Cosmos3Tokenizer.from_folder(tmp_path)
    assert str(tmp_path / "tokenizer.json") in str(info.value)


def test_missing_tokenizer_config_names_path(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    (folder / "tokenizer_config.json").unlink()
    with pytest.raises(FileNotFoundError, match="tokenizer_config.json") as info:
        tok.Cosmos3Tokenizer.from_folder(folder)
    assert str(folder / "tokenizer_config.json") in str(info.value)


def test_missing_chat_template_error(checkpoint, tmp_path):
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    del config["chat_template"]
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="no chat template") as info:
        tok.Cosmos3Tokenizer.from_folder(folder)
    assert str(folder) in str(info.value)


def test_missing_vision_start_token_error(checkpoint, tmp_path):
    from tokenizers import Tokenizer

    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] != "<|vision_start|>"]
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {
        k: v for k, v in config["added_tokens_decoder"].items() if v["content"] != "<|vision_start|>"
    }
    config["additional_special_tokens"].remove("<|vision_start|>")
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert Tokenizer.from_file(str(folder / "tokenizer.json")).token_to_id("<|vision_start|>") is None
    with pytest.raises(ValueError, match="vision_start"):
        tok.Cosmos3Tokenizer.from_folder(folder)


def test_added_tokens_from_config_fill_gaps(checkpoint, tmp_path, ours):
    # A tokenizer.json without added tokens still gets them, at the same ids, from tokenizer_config.json.
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["added_tokens"] = []
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    rebuilt = tok.Cosmos3Tokenizer.from_folder(folder)
    assert rebuilt.encode("A cat.", negative=False, width=64, height=64, frames=9, fps=24) == ours.encode(
        "A cat.", negative=False, width=64, height=64, frames=9, fps=24
    )


# --------------------------------------------------------------------------
# tiny tokenizer
# --------------------------------------------------------------------------


def test_tiny_tokenizer_is_deterministic_and_small(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tiny.write_tiny_tokenizer(str(a))
    tiny.main([str(b)])
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert filecmp.cmp(a / name, b / name, shallow=False)
    loaded = tok.Cosmos3Tokenizer.from_folder(a)
    assert loaded.vocab_size <= MAX_ID
    assert max(loaded.tokenizer.get_vocab().values()) < MAX_ID
    for token in tiny.SPECIAL_TOKENS:
        assert token in loaded.tokenizer.get_vocab()
    assert sorted(os.listdir(a)) == ["tokenizer.json", "tokenizer_config.json"]


def test_template_helpers_like_transformers(checkpoint, tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = _copy_tokenizer(checkpoint, tmp_path / "text_tokenizer")
    source = (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
        "{% set d = dict(a=1) %}{{ d | tojson }} {{ ns.n }} {{ eos_token }} {{ pad_token }}\n"
        "{% for m in messages %}{% generation %}{{ m['content'] }}{% endgeneration %}{% if loop.first %}"
        "{% continue %}{% endif %}|{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    (folder / "chat_template.jinja").write_text(source, encoding="utf-8")
    hf = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    ours = tok.Cosmos3Tokenizer.from_folder(folder)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert tiny.render_chat(ours, "u", "s") == hf.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, add_vision_id=False
    )
    (folder / "chat_template.jinja").write_text("{% set ns = namespace(_x=1) %}", encoding="utf-8")
    with pytest.raises(jinja2.exceptions.SecurityError):
        tiny.render_chat(tok.Cosmos3Tokenizer.from_folder(folder), "u", None)


# --------------------------------------------------------------------------
# family flavours and layouts
# --------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["video_default", "image", "empty_negative", "unicode"])
def test_nemotron_flavour_at_checkpoint_root_matches_pipeline(case, tmp_path, pipeline_module):
    """An Edge-style tokenizer (special tokens first, bos in the template, eos </s>) kept at the checkpoint root."""
    transformers = pytest.importorskip("transformers")
    tiny.write_tiny_tokenizer(str(tmp_path), "nemotron")
    ours = tok.Cosmos3Tokenizer.from_folder(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    prompt, negative, frames, width, height, fps, res, dur, use_system = CASES[case]
    expected = pipeline_module.Cosmos3OmniPipeline.tokenize_prompt(
        _make_reference(pipeline_module, hf), prompt, negative, num_frames=frames, height=height, width=width,
        fps=fps, use_system_prompt=use_system, add_resolution_template=res, add_duration_template=dur,
    )
    got = _ours_pair(ours, prompt, negative, frames=frames, width=width, height=height, fps=fps, res=res, dur=dur,
                     use_system_prompt=use_system)
    assert got == tuple(expected)
    assert ours.eos_token == "</s>" and got[0][0] == hf.convert_tokens_to_ids("<s>") and got[0][-1] == 5
    assert all(0 <= i < MAX_ID for ids in got for i in ids)


def test_text_tokenizer_folder_wins_over_root_files(checkpoint, tmp_path):
    """With both, the checkpoint's text_tokenizer/ is used (the root may hold an unrelated reasoner tokenizer)."""
    root = tmp_path / "ckpt"
    shutil.copytree(checkpoint / "text_tokenizer", root / "text_tokenizer")
    tiny.write_tiny_tokenizer(str(root), "nemotron")
    assert tok.Cosmos3Tokenizer.from_folder(root).eos_token == "<|im_end|>"
