"""IR2Vec vocabularies (LLVM 22's seed embeddings) as the inlining problem
needs them: the dimension, read without LLVM so a problem can be built
before anything compiles. LLVM itself reads the file when compiling (and
says what is wrong with one it rejects)."""

from __future__ import annotations

import json
import os

from ...errors import IR2VecVocabError

SECTIONS = ("Opcodes", "Types", "Arguments")


def ir2vec_dimension(path: str | os.PathLike) -> int:
    """The embedding dimension of the vocabulary at `path` (every entry of
    every section must have it); IR2VecVocabError naming the file and entry."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise IR2VecVocabError(f"{path}: no such IR2Vec vocabulary file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise IR2VecVocabError(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(s), dict) for s in SECTIONS):
        raise IR2VecVocabError(f"{path}: an IR2Vec vocabulary is a JSON object with sections "
                               f"{', '.join(SECTIONS)} (entity -> vector)")
    dim = None
    for section in SECTIONS:
        for entity, vector in data[section].items():
            if not isinstance(vector, list) or not all(isinstance(v, (int, float)) for v in vector):
                raise IR2VecVocabError(f"{path}: {section}/{entity} is not a list of numbers")
            if dim is None:
                dim = len(vector)
            elif len(vector) != dim:
                raise IR2VecVocabError(f"{path}: {section}/{entity} has {len(vector)} values, "
                                       f"other entries {dim}")
    if not dim:
        raise IR2VecVocabError(f"{path}: the vocabulary has no embeddings")
    return dim
