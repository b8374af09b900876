"""Where the model task's model and text come from, checked in one line each, and their digest (the reuse key's).

A model is named by:

- ``random:<model_type>`` (``random:qwen3_next``, ``random:kimi_linear``, ...; ``random:<model_type>:<seed>``): a tiny
  random model built from its config class (``lacapacity.inputs.capture.tiny``), nothing downloaded;
- a local folder holding ``config.json`` and the weights (what ``save_pretrained`` writes): loaded with
  ``AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)`` in float32.

A hub id (``Qwen/Qwen3.5-0.8B``) is refused in one line: these machines reach no hub, so download it where one is
reachable and pass the folder. Text becomes token ids by the folder's tokenizer where it has one
(``tokenizer.json`` or ``tokenizer_config.json``: ``AutoTokenizer``, no special tokens); a model without one (every
``random:`` model, and a folder saved without a tokenizer, such as ``scripts/train_tiny_hybrid.py``'s) reads the
text's UTF-8 bytes as ids 0..255 (a byte-level tokenizer; the model's vocabulary must hold 256 ids).

``digest`` hashes what the numbers depend on: every tensor of the loaded state dict (names, dtypes, shapes, bytes),
the config (``config.to_json_string``), the text's bytes and the tokenizer (its files, or "bytes"); it enters the
study's reuse key through the task's settings (``Model.to_json``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lacapacity.errors import CapacityError, user_code
from lacapacity.inputs import capture

DEFAULT_TEXT = Path(__file__).resolve().parents[2] / "data" / "pretrained_text.txt"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class Loaded:
    """A loaded model and its text as ids: ``ids`` int64 ``[1, T]`` (all the text's tokens), ``tokenizer`` how text
    became ids ("bytes" or the tokenizer's class name), ``family`` of its linear layers."""

    model: torch.nn.Module
    ids: torch.Tensor
    tokenizer: str
    family: capture.Family
    files: tuple[Path, ...]  # the tokenizer's files (empty for bytes)


def _require_transformers() -> None:
    if importlib.util.find_spec("transformers") is None:
        raise CapacityError(f"the model task needs transformers: {capture.INSTALL}")


def text_path(text: str | None) -> Path:
    """The text file: ``text`` or the shipped one; one line if it is not a readable file."""
    path = DEFAULT_TEXT if text is None else Path(text).expanduser()
    if not path.is_file():
        raise CapacityError(f"model: text {str(path)!r} is not a file")
    return path


def _folder(model: str) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CapacityError(
                f"model: folder {str(path)!r} is not a model (no config.json): pass a folder written by save_pretrained"
            )
        return path
    if path.exists():
        raise CapacityError(f"model: {str(path)!r} is a file, not a model folder")
    if "/" in model and not model.startswith((".", "/", "~")) and model.count("/") == 1:
        raise CapacityError(
            f"model: {model!r} is not a local folder, and a hub id cannot be downloaded here (no network): download it where a hub is reachable and pass its folder"
        )
    raise CapacityError(f"model: no folder {model!r}; pass a local model folder or random:<model_type>")


def check(model: str) -> None:
    """Refuse a model name that cannot be loaded, without loading anything heavy (the config only)."""
    _require_transformers()
    if model.startswith("random:"):
        _random_name(model)
        return
    folder = _folder(model)
    from transformers import AutoConfig

    try:
        with user_code(f"model {str(folder)!r}", "reading its config"):
            config = AutoConfig.from_pretrained(folder, local_files_only=True)
    except CapacityError as exc:
        raise CapacityError(f"model: {folder} has a config transformers cannot read ({exc})") from None
    capture.family_of(capture.linear_type(config))


def _random_name(model: str) -> tuple[str, int]:
    parts = model.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and not parts[2].isdigit()):
        raise CapacityError(f"model: {model!r} must be random:<model_type> or random:<model_type>:<seed>")
    capture.family_of(parts[1])
    return parts[1], int(parts[2]) if len(parts) == 3 else 0


@functools.lru_cache(maxsize=1)
def load(model: str, text: str | None) -> Loaded:
    """The model (float32, eval) and all of the text's token ids, loaded once per process (the last one kept)."""
    _require_transformers()
    path = text_path(text)
    raw = path.read_bytes()
    if model.startswith("random:"):
        model_type, seed = _random_name(model)
        net: Any = capture.tiny(model_type, seed=seed)  # a transformers model: its config is untyped
        folder = None
    else:
        folder = _folder(model)
        check(model)
        from transformers import AutoModelForCausalLM

        try:
            with user_code(f"model {str(folder)!r}", "loading its weights"):
                net = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=torch.float32)
        except CapacityError as exc:
            raise CapacityError(f"model: the weights in {folder} failed to load ({exc})") from None
        net = net.float().eval()
    family = capture.family_of(capture.linear_type(net.config))
    tokenizer, ids = "bytes", list(raw)
    files: tuple[Path, ...] = ()
    if folder is not None and any((folder / f).is_file() for f in _TOKENIZER_FILES):
        from transformers import AutoTokenizer

        with user_code(f"tokenizer of {str(folder)!r}", "tokenising the text"):
            tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            ids = list(tok(raw.decode("utf-8"), add_special_tokens=False)["input_ids"])
        tokenizer = type(tok).__name__
        files = tuple(sorted(p for p in folder.iterdir() if p.name.startswith(("tokenizer", "vocab", "merges"))))
    elif int(net.config.vocab_size) < 256:
        raise CapacityError(
            f"model: without a tokenizer the text is read as bytes (ids 0..255), but the model's vocabulary has {net.config.vocab_size} ids"
        )
    return Loaded(net, torch.tensor([ids], dtype=torch.int64), tokenizer, family, files)


@functools.lru_cache(maxsize=4)
def digest(model: str, text: str | None) -> str:
    """sha256 of the loaded state dict, the config, the text and the tokenizer (see the module docstring)."""
    loaded = load(model, text)
    h = hashlib.sha256()
    for name, t in sorted(loaded.model.state_dict().items()):
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    config: Any = loaded.model.config
    h.update(config.to_json_string(use_diff=False).encode())
    h.update(text_path(text).read_bytes())
    h.update(loaded.tokenizer.encode())
    for f in loaded.files:
        h.update(f.read_bytes())
    return h.hexdigest()
