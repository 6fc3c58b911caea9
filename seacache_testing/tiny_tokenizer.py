"""Write a tiny tokenizer for tests, in the flavour of a Cosmos3 family member.

The folder it writes stands in for a checkpoint's ``text_tokenizer/``: a
byte-level BPE ``tokenizer.json`` (Qwen2's normalizer and pre-tokenizer, 256
byte tokens plus a few hand-picked merges) and a ``tokenizer_config.json`` with
a chat template that ``transformers.AutoTokenizer.from_pretrained`` loads
offline. Flavours (``FLAVOURS``):

- ``qwen2`` (Nano, Super): ChatML special tokens after the vocabulary, a
  Qwen2-VL-style template that writes a default system turn, eos ``<|im_end|>``.
- ``nemotron`` (stand-in for Edge, whose Nemotron backbone may ship another
  tokenizer): special tokens first (ids 0..), a ``<s>`` bos the template writes,
  eos ``</s>``, no default system turn, ``PreTrainedTokenizerFast`` class.

Every id is below ``MAX_ID`` so a test model with a 512-entry embedding covers
them all. The output is byte-for-byte deterministic.

Usage: python -m seacache_testing.tiny_tokenizer OUT_FOLDER [--flavour qwen2|nemotron]
"""

from __future__ import annotations

import argparse
import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

MAX_ID = 512

# Qwen2's pre-tokenizer split: contractions, letter runs, single digits,
# punctuation runs, newlines, whitespace.
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

# Words whose byte-level spellings (with and without a leading space) get
# merges, so common prompt text becomes a few tokens rather than all bytes.
_MERGE_WORDS = (
    "the", "is", "of", "and", "a", "video", "image", "This", "The", "not",
    "seconds", "long", "FPS", "resolution", "You", "are", "helpful",
    "assistant", "who", "will", "generate", "videos", "images", "from",
    "give", "prompt", "system", "user", "robot", "cat", "on", "in", "with",
)
NEMOTRON_SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>")
_MAX_BPE_VOCAB = MAX_ID - len(SPECIAL_TOKENS) - 24  # headroom below MAX_ID

# A Qwen2-VL-style ChatML template: a default system turn when the chat does
# not start with one, string or multimodal content, optional vision ids, and
# an assistant header for add_generation_prompt.
CHAT_TEMPLATE = (
    "{% set seen = namespace(images=0, videos=0) %}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('unsupported chat role: ' ~ message['role']) }}"
    "{% endif %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' or 'image' in part or 'image_url' in part %}"
    "{% set seen.images = seen.images + 1 %}"
    "{% if add_vision_id %}Picture {{ seen.images }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'video' or 'video' in part %}"
    "{% set seen.videos = seen.videos + 1 %}"
    "{% if add_vision_id %}Video {{ seen.videos }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in part %}"
    "{{ part['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# Nemotron-style ChatML: the bos token first, no default system turn.
NEMOTRON_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
FLAVOURS = ("qwen2", "nemotron")


def _byte_alphabet() -> list[str]:
    """The GPT-2 byte-to-character map (byte order): printable bytes map to themselves, the rest to U+0100+."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {}
    shift = 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + shift)
            shift += 1
    return [chars[byte] for byte in range(256)]


def _vocab_and_merges(first: tuple[str, ...] = ()) -> tuple[dict[str, int], list[tuple[str, str]]]:
    alphabet = _byte_alphabet()
    vocab = {token: index for index, token in enumerate(first)}
    vocab.update({char: len(first) + index for index, char in enumerate(alphabet)})
    merges: list[tuple[str, str]] = []
    for word in _MERGE_WORDS:
        for spelled in (" " + word, word):
            chars = "".join(alphabet[byte] for byte in spelled.encode("utf-8"))
            left = chars[0]
            for char in chars[1:]:
                joined = left + char
                if joined not in vocab:
                    if len(vocab) >= _MAX_BPE_VOCAB:
                        return vocab, merges
                    vocab[joined] = len(vocab)
                    merges.append((left, char))
                left = joined
    return vocab, merges


def special_tokens(flavour: str = "qwen2") -> tuple[str, ...]:
    """The special tokens of a flavour."""
    return NEMOTRON_SPECIAL_TOKENS if flavour == "nemotron" else SPECIAL_TOKENS


def build_tokenizer(flavour: str = "qwen2") -> Tokenizer:
    """The tiny byte-level BPE tokenizer: special tokens after the vocabulary (qwen2) or first (nemotron)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"Unknown tokenizer flavour {flavour!r}; choose one of {FLAVOURS}.")
    specials = special_tokens(flavour)
    vocab, merges = _vocab_and_merges(specials if flavour == "nemotron" else ())
    tokenizer = Tokenizer(
        BPE(
            vocab=vocab,
            merges=merges,
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in specials])
    return tokenizer


def _tokenizer_config(tokenizer: Tokenizer, flavour: str) -> dict:
    added = {}
    for token in special_tokens(flavour):
        added[str(tokenizer.token_to_id(token))] = {
            "content": token,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
    if flavour == "nemotron":
        return {
            "added_tokens_decoder": added,
            "bos_token": "<s>",
            "chat_template": NEMOTRON_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "</s>",
            "model_max_length": 131072,
            "pad_token": "<unk>",
            "tokenizer_class": "PreTrainedTokenizerFast",
            "unk_token": "<unk>",
        }
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def write_tiny_tokenizer(folder: str, flavour: str = "qwen2") -> None:
    """Write the tiny tokenizer's ``tokenizer.json`` and ``tokenizer_config.json`` into ``folder`` (created)."""
    os.makedirs(folder, exist_ok=True)
    tokenizer = build_tokenizer(flavour)
    if tokenizer.get_vocab_size(with_added_tokens=True) > MAX_ID:
        raise AssertionError("tiny tokenizer vocabulary exceeds MAX_ID")
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as handle:
        handle.write(tokenizer.to_str(pretty=True))
        handle.write("\n")
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8", newline="\n") as handle:
        json.dump(_tokenizer_config(tokenizer, flavour), handle, ensure_ascii=False, indent=2, sort_keys=True)
        handle.write("\n")


def render_chat(tokenizer, text: str, system_prompt: str | None) -> str:
    """The chat template of a ``cosmos3.tokenizer.Cosmos3Tokenizer`` rendered for one user turn (plus an optional
    system turn) and the assistant header: the text its ``encode_prompt`` tokenizes."""
    return tokenizer.tokenizer.apply_chat_template(
        tokenizer.chat_messages(text, system_prompt), tokenize=False, add_generation_prompt=True, add_vision_id=False
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write a tiny tokenizer (a text_tokenizer/ stand-in).")
    parser.add_argument("folder", help="output folder, e.g. <checkpoint>/text_tokenizer")
    parser.add_argument("--flavour", choices=FLAVOURS, default="qwen2", help="qwen2 (Nano, Super) or nemotron (Edge)")
    args = parser.parse_args(argv)
    write_tiny_tokenizer(args.folder, args.flavour)
    print(f"wrote tiny tokenizer to {args.folder}")


if __name__ == "__main__":
    main()
