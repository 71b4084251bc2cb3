"""Corpora in ml-compiler-opt's layout: ``corpus_description.json`` listing
``modules``, each ``<m>.bc`` with its compile command in ``<m>.cmd``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import CorpusError
from .module import Module

PathLike = str | os.PathLike


def load_corpus(directory: PathLike) -> list[Module]:
    """The modules of an ml-compiler-opt corpus directory."""
    directory = Path(directory)
    desc_path = directory / "corpus_description.json"
    try:
        desc = json.loads(desc_path.read_bytes())
    except OSError as e:
        raise FileNotFoundError(e.errno, f"not a corpus: {e.strerror}", str(desc_path)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{desc_path}: invalid JSON: {e}") from None
    modules = desc.get("modules") if isinstance(desc, dict) else None
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise CorpusError(f"{desc_path}: expected an object with a 'modules' list of names")
    return [Module.from_corpus(directory / f"{m}.bc") for m in modules]
