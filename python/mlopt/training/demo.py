"""``mlopt demo``: the recipe (:mod:`.recipe`) on the default corpus, end
to end -- fetch the corpus (real C and C++ from pinned PyPI sdists), split
it by package into train / validation / test as :data:`SPLIT` pins it, and
run the recipe: the package pre-pass and its one-site-linkonce rule, BC and
ES with the rule in every rollout, the validation gate that decides whether
the trained policy ships, and the test packages scored through stock clang
with the plugin."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..corpus import PACKAGES, corpus_entries, fetch_corpus, split_corpus
from ..errors import OutputExistsError
from .recipe import RecipeConfig, format_recipe, run_recipe
from .recipe import language_totals as recipe_language_totals

SMALL_PACKAGES = ("lz4", "ujson", "marisa-trie")  # one C and two C++ packages: the reduced mode

# Which package goes where (every package pinned: the split is a decision,
# not a hash accident of 7 names). Test: one C and one C++ library of
# different kinds (lz4, a compressor; marisa-trie, a trie), never looked at
# while training or choosing. Validation: one C and one C++ package again
# (zstandard: one large C module; ujson: double-conversion in C++), few
# modules, so validating every ES iteration stays cheap. Training: the
# rest, most of the modules (brotli and pycryptodome in C, jsonnet in C++).
# The reduced mode's three packages: marisa-trie (the most modules) to
# train, ujson to validate, lz4 to test.
SPLIT = {"lz4": "test", "marisa-trie": "test", "zstandard": "validation", "ujson": "validation",
         "brotli": "train", "pycryptodome": "train", "jsonnet": "train"}
SMALL_SPLIT = {"marisa-trie": "train", "ujson": "validation", "lz4": "test"}
SIDES = {"train": 0.7, "validation": 0.15, "test": 0.15}  # every package is pinned: only the names count


# the demo's budget (about 5 minutes on 2 cores), and its reduced mode's: the same steps, 1 ES iteration
BUDGET = RecipeConfig(iterations=8, perturbations=8, modules=16)
REDUCED = RecipeConfig(iterations=1, perturbations=2, modules=4, bc_epochs=5)


def demo_splits(splits: Path, small: bool = False) -> tuple[list, list, list]:
    """The default corpus (its reduced mode with ``small``), split by package
    into ``splits/train``, ``splits/validation`` and ``splits/test`` as
    :data:`SPLIT` (:data:`SMALL_SPLIT`) pins them: (train, validation, test)
    corpus entries."""
    corpus = fetch_corpus(None, list(SMALL_PACKAGES) if small else None).output
    split_corpus(corpus, splits, SIDES, by="package", assign=SMALL_SPLIT if small else SPLIT, force=True)
    train, validation, test = (corpus_entries(splits / side) for side in SIDES)
    return train, validation, test


def run_demo(out: str | os.PathLike, config: RecipeConfig, *, small: bool = False, force: bool = False,
             say: Callable[[str], None] = print, quiet: bool = False) -> dict:
    """The recipe on the default corpus (its reduced mode with ``small``); writes ``out/demo.json``."""
    out = Path(out)
    if (out / "demo.json").exists() and not force:  # before anything in it is touched
        raise OutputExistsError(str(out / "demo.json"))
    say("[   0.0 s] corpus: fetching and building the default corpus" + (" (reduced)" if small else ""))
    demo_splits(out / "splits", small)
    return run_recipe(out / "splits", out, config, languages={p.name: p.language for p in PACKAGES}, force=force,
                      say=say, quiet=quiet, result_name="demo.json", extra={"small": small})


def language_totals(rows: list) -> dict:
    """Totals of evaluation rows for C, C++ and all packages of the default corpus."""
    return recipe_language_totals(rows, {p.name: p.language for p in PACKAGES})


format_result = format_recipe
