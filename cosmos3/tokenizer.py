"""Cosmos3 prompt tokenization without ``transformers``.

Cosmos3 has no separate text encoder: its transformer reads raw token ids.
This module turns a prompt into the ids the reference diffusers pipeline
(``Cosmos3OmniPipeline.tokenize_prompt``) produces: metadata sentences are
appended to the prompt, the checkpoint's own chat template is rendered with
jinja2 the way ``transformers`` renders it, the result is tokenized with the
checkpoint's ``tokenizer.json`` and ``[eos, <|vision_start|>]`` is appended.

Only the standard library, ``tokenizers`` and ``jinja2`` are imported, so the
module runs inside ComfyUI.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Tokenizer

__all__ = [
    "SYSTEM_PROMPT_VIDEO",
    "SYSTEM_PROMPT_IMAGE",
    "VISION_START_TOKEN",
    "Cosmos3Tokenizer",
    "apply_prompt_templates",
    "default_system_prompt",
]

# Default system prompts of the reference pipeline. The "give" (for "given")
# is what the model was trained with; keep it.
SYSTEM_PROMPT_VIDEO = "You are a helpful assistant who will generate videos from a give prompt."
SYSTEM_PROMPT_IMAGE = "You are a helpful assistant who will generate images from a give prompt."

VISION_START_TOKEN = "<|vision_start|>"

# Metadata sentences appended to the prompt (the "is not" forms to the
# negative prompt). Duration comes first, then resolution.
_DURATION = "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS."
_DURATION_NOT = "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS."
_RESOLUTION = {
    (False, False): "This video is of {height}x{width} resolution.",
    (False, True): "This video is not of {height}x{width} resolution.",
    (True, False): "This image is of {height}x{width} resolution.",
    (True, True): "This image is not of {height}x{width} resolution.",
}

_TEXT_TOKENIZER_DIR = "text_tokenizer"
_LAYOUT_HINT = (
    "Expected a Cosmos3 checkpoint folder containing text_tokenizer/ with tokenizer.json and "
    "tokenizer_config.json (optionally chat_template.jinja), or that text_tokenizer/ folder itself."
)

# Named special tokens that transformers hands to every chat template.
_NAMED_SPECIAL_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


def default_system_prompt(frames: int) -> str:
    """Return the reference pipeline's default system prompt: the image one when ``frames == 1``."""
    return SYSTEM_PROMPT_IMAGE if frames == 1 else SYSTEM_PROMPT_VIDEO


def _append_sentence(text: str, sentence: str) -> str:
    text = text.rstrip(".")
    return f"{text}. {sentence}" if text else sentence


def apply_prompt_templates(
    prompt: str,
    *,
    negative: bool,
    width: int,
    height: int,
    frames: int,
    fps: float,
    resolution_template: bool = True,
    duration_template: bool = True,
) -> str:
    """Append the duration and resolution sentences the model was trained with.

    Matches the reference pipeline: a single frame is an image (no duration
    sentence, "This image ..."), the negative prompt gets the "is not" forms,
    trailing dots of the text are replaced by one ". " separator, and an empty
    text becomes just the sentence.
    """
    is_image = frames == 1
    text = prompt or ""
    if duration_template and not is_image:
        template = _DURATION_NOT if negative else _DURATION
        text = _append_sentence(text, template.format(duration=frames / fps, fps=fps))
    if resolution_template:
        template = _RESOLUTION[(is_image, bool(negative))]
        text = _append_sentence(text, template.format(height=height, width=width))
    return text


# --------------------------------------------------------------------------
# Chat-template rendering, configured like transformers' apply_chat_template
# --------------------------------------------------------------------------


def _raise_exception(message: str):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Plain json.dumps: jinja's own tojson escapes HTML characters.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _DictFactory:
    """``dict(...)`` for templates without exposing the dict type itself."""

    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """``namespace(...)`` that refuses underscore-prefixed attribute names."""

    def __init__(*args, **kwargs):  # noqa: N805 - mirrors jinja's Namespace signature
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"chat templates cannot set namespace attribute {name!r}")


class _GenerationBlock(jinja2.ext.Extension):
    """Accept ``{% generation %}...{% endgeneration %}`` (training-mask markers) and render the body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _compile_chat_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _DictFactory()
    env.globals["namespace"] = _Namespace
    return env.from_string(source)


# --------------------------------------------------------------------------
# Checkpoint files
# --------------------------------------------------------------------------


def _token_content(value: Any) -> str | None:
    """A special token as stored in tokenizer_config.json: a string or a serialized AddedToken."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        raise ValueError(f"Cosmos3 tokenizer: {path} is not valid JSON ({err})") from err


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _resolve_folder(path: str) -> str:
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"Cosmos3 tokenizer: folder not found: {path}. {_LAYOUT_HINT}")
    nested = os.path.join(path, _TEXT_TOKENIZER_DIR)
    if os.path.isdir(nested):
        return nested
    return path


def _load_chat_template(folder: str, config: dict) -> str:
    """Pick the chat template transformers would use (no tools).

    Precedence as in transformers: ``chat_template.jinja`` and
    ``additional_chat_templates/*.jinja`` replace the config's template; the
    ``"default"`` entry is used when there are several. ``chat_template.json``
    (a processor-level file) is read last, only when nothing else has one.
    """
    templates: dict[str, str] = {}
    jinja_file = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(jinja_file):
        templates["default"] = _read_text(jinja_file)
    extra_dir = os.path.join(folder, "additional_chat_templates")
    if os.path.isdir(extra_dir):
        for name in sorted(os.listdir(extra_dir)):
            if name.endswith(".jinja"):
                templates[name[: -len(".jinja")]] = _read_text(os.path.join(extra_dir, name))

    chosen: Any
    if templates:
        chosen = templates["default"] if list(templates) == ["default"] else templates
    else:
        chosen = config.get("chat_template")
        if chosen is None:
            json_file = os.path.join(folder, "chat_template.json")
            if os.path.isfile(json_file):
                chosen = _read_json(json_file).get("chat_template")
        if isinstance(chosen, (list, tuple)):
            chosen = {entry["name"]: entry["template"] for entry in chosen}

    if isinstance(chosen, dict):
        if "default" not in chosen:
            raise ValueError(
                f"Cosmos3 tokenizer: {folder} has several chat templates {sorted(chosen)} and none named 'default'"
            )
        chosen = chosen["default"]
    if not isinstance(chosen, str) or not chosen:
        raise FileNotFoundError(
            f"Cosmos3 tokenizer: no chat template in {folder} (looked for chat_template.jinja, "
            f"'chat_template' in tokenizer_config.json, chat_template.json). {_LAYOUT_HINT}"
        )
    return chosen


def _template_special_tokens(config: dict) -> dict[str, str]:
    """The special-token variables transformers passes to the template (``bos_token``, ``eos_token`` ...)."""
    tokens: dict[str, str] = {}
    for key, value in config.items():
        is_named = key in _NAMED_SPECIAL_TOKENS or key.endswith("_token")
        content = _token_content(value)
        if is_named and content is not None:
            tokens[key] = content
    extra = config.get("extra_special_tokens")
    if isinstance(extra, dict):
        for key, value in extra.items():
            content = _token_content(value)
            if content is not None:
                tokens[key] = content
    return tokens


def _ensure_added_tokens(tokenizer: Tokenizer, config: dict) -> None:
    """Add the config's added/special tokens that tokenizer.json lacks, in id order, as transformers does."""
    decoder = config.get("added_tokens_decoder") or {}
    entries = []
    for index, entry in decoder.items():
        if isinstance(entry, dict) and isinstance(entry.get("content"), str):
            entries.append((int(index), entry))
    for _, entry in sorted(entries, key=lambda item: item[0]):
        if tokenizer.token_to_id(entry["content"]) is None:
            token = AddedToken(
                entry["content"],
                single_word=entry.get("single_word", False),
                lstrip=entry.get("lstrip", False),
                rstrip=entry.get("rstrip", False),
                normalized=entry.get("normalized", not entry.get("special", False)),
                special=entry.get("special", False),
            )
            tokenizer.add_tokens([token])

    specials = [_token_content(config.get(key)) for key in _NAMED_SPECIAL_TOKENS]
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = config.get(key)
        if isinstance(extra, dict):
            extra = list(extra.values())
        if isinstance(extra, (list, tuple)):
            specials.extend(_token_content(value) for value in extra)
    missing = [token for token in specials if token and tokenizer.token_to_id(token) is None]
    if missing:
        unique = dict.fromkeys(missing)
        tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in unique])


class Cosmos3Tokenizer:
    """Cosmos3 prompt tokenizer built from a checkpoint's ``text_tokenizer/`` files."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        chat_template: str,
        eos_token: str,
        template_tokens: dict[str, str] | None = None,
    ):
        """Wrap a ``tokenizers.Tokenizer``, the chat template source and the eos token string.

        ``template_tokens`` are the extra variables (``bos_token`` ...) the
        template may read; ``from_folder`` fills them from tokenizer_config.json.
        """
        self.tokenizer = tokenizer
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.chat_template = chat_template
        self._template = _compile_chat_template(chat_template)
        self.template_tokens = dict(template_tokens or {})
        self.template_tokens.setdefault("eos_token", eos_token)
        self.eos_token = eos_token
        self.eos_token_id = self._require_id(eos_token, "eos token")
        self.vision_start_id = self._require_id(VISION_START_TOKEN, "start-of-generation token")

    def _require_id(self, token: str, what: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(f"Cosmos3 tokenizer: the {what} {token!r} is not in the vocabulary")
        return token_id

    @classmethod
    def from_folder(cls, path: str | os.PathLike) -> Cosmos3Tokenizer:
        """Load from a checkpoint folder (its ``text_tokenizer/`` subfolder is used) or from that subfolder itself.

        Reads ``tokenizer.json``, ``tokenizer_config.json`` (eos token, added
        tokens, chat template) and ``chat_template.jinja`` / ``chat_template.json``
        when present. Missing files raise errors that name the path.
        """
        folder = _resolve_folder(path)
        tokenizer_file = os.path.join(folder, "tokenizer.json")
        config_file = os.path.join(folder, "tokenizer_config.json")
        for required in (tokenizer_file, config_file):
            if not os.path.isfile(required):
                raise FileNotFoundError(f"Cosmos3 tokenizer: missing {required}. {_LAYOUT_HINT}")

        config = _read_json(config_file)
        if not isinstance(config, dict):
            raise ValueError(f"Cosmos3 tokenizer: {config_file} must hold a JSON object")
        eos_token = _token_content(config.get("eos_token"))
        if eos_token is None:
            raise ValueError(f"Cosmos3 tokenizer: {config_file} has no 'eos_token'")

        try:
            tokenizer = Tokenizer.from_file(tokenizer_file)
        except Exception as err:  # tokenizers raises a bare Exception on malformed files
            raise ValueError(f"Cosmos3 tokenizer: cannot read {tokenizer_file}: {err}") from err
        _ensure_added_tokens(tokenizer, config)
        tokenizer.encode_special_tokens = bool(config.get("split_special_tokens", False))

        return cls(
            tokenizer,
            _load_chat_template(folder, config),
            eos_token,
            _template_special_tokens(config),
        )

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce, added tokens included."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def render_chat(self, text: str, system_prompt: str | None) -> str:
        """Render the chat template for one user turn (plus an optional system turn) and the assistant header."""
        messages = []
        if system_prompt is not None:
            messages.append({"role": "system", "content": system_prompt})
        messages.append({"role": "user", "content": text})
        variables = {**self.template_tokens, "add_vision_id": False}
        return self._template.render(
            messages=messages,
            tools=None,
            documents=None,
            add_generation_prompt=True,
            **variables,
        )

    def encode_prompt(self, text: str, system_prompt: str | None) -> list[int]:
        """Token ids of the chat for ``text`` followed by ``[eos, <|vision_start|>]``.

        Same ids as transformers' ``apply_chat_template(..., add_generation_prompt=True,
        add_vision_id=False)`` plus the two tokens the pipeline appends.
        ``system_prompt=None`` sends no system message (the template may still
        write its own default one).
        """
        rendered = self.render_chat(text, system_prompt)
        ids = self.tokenizer.encode(rendered, add_special_tokens=False).ids
        return list(ids) + [self.eos_token_id, self.vision_start_id]

    def encode(
        self,
        prompt: str,
        *,
        negative: bool,
        width: int,
        height: int,
        frames: int,
        fps: float,
        resolution_template: bool = True,
        duration_template: bool = True,
        use_system_prompt: bool = True,
        system_prompt: str | None = None,
    ) -> list[int]:
        """Token ids for a positive or negative prompt, as the reference pipeline builds them.

        Appends the metadata sentences, then encodes with the default system
        prompt for video or image (``frames == 1``) when ``use_system_prompt``;
        a ``system_prompt`` string replaces that default (used verbatim, even
        when empty).
        """
        text = apply_prompt_templates(
            prompt,
            negative=negative,
            width=width,
            height=height,
            frames=frames,
            fps=fps,
            resolution_template=resolution_template,
            duration_template=duration_template,
        )
        system = None
        if use_system_prompt:
            system = default_system_prompt(frames) if system_prompt is None else system_prompt
        return self.encode_prompt(text, system)
