"""``mlopt doctor``: what this installation has, per LLVM major (pass plugin,
in-process engine, regalloc eviction, IR2Vec, lld for LTO), the LiteRT runtime, the LLVM
tools found on the machine and where mlopt keeps its caches; ``--json`` for
machines. It only looks: nothing is built, fetched or written. A part that is
missing is named with why and what to do (warnings); the exit status is 0 as
long as mlopt's C++ core loads (``--strict``: 1 when there is a warning)."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

from ._common import add_command

IR2VEC_SINCE = 21  # LLVM's IR2Vec embeddings for the inliner
REGALLOC_MAJORS = (19,)  # mlopt's regalloc eviction advisor
TOOLS = ("clang", "opt", "llc", "llvm-config", "ld.lld")


def _engine_facts(major: int) -> dict:
    try:
        e = importlib.import_module(f"mlopt._engine{major}")
    except ImportError:
        return {"engine": None, "llvm_version": None, "regalloc": None}
    return {"engine": e.__file__, "llvm_version": e.llvm_version,
            "regalloc": e.regalloc_source_version if e.regalloc_supported else None}


def _tools(major: int) -> dict[str, str | None]:
    return {tool: shutil.which(f"{tool}-{major}") for tool in TOOLS}


def _litert() -> dict:
    try:
        version = importlib.metadata.version("ai-edge-litert")
    except importlib.metadata.PackageNotFoundError:
        version = None
    from .. import _native

    return {"ai_edge_litert": version, "library": _native.litert_library()}


def collect() -> dict:
    """Everything ``mlopt doctor`` reports, as plain data."""
    from .. import _native
    from ..corpus.fetch import cache_dir

    core = _native.core()
    majors = {}
    warnings = []
    for major in _native.LLVM_MAJORS:
        plugin = _native.plugin_file(major)
        facts = {"plugin": str(plugin) if plugin.is_file() else None, **_engine_facts(major),
                 "tools": _tools(major)}
        built = facts["engine"] is not None
        facts["ir2vec"] = built and major >= IR2VEC_SINCE
        facts["lto"] = facts["plugin"] is not None and facts["tools"]["ld.lld"] is not None
        majors[str(major)] = facts
        if facts["plugin"] is not None and facts["tools"]["ld.lld"] is None:
            warnings.append(f"LLVM {major}: no ld.lld-{major}: LTO builds with the plugin need lld "
                            f"(apt-get install lld-{major})")
        if not built and facts["tools"]["llvm-config"]:
            warnings.append(f"LLVM {major} is installed but mlopt was built without it: reinstall mlopt")
        elif not built:
            warnings.append(f"LLVM {major}: not built ({_native.rebuild_hint(major)})")
        if built and major in REGALLOC_MAJORS and facts["regalloc"] is None:
            warnings.append(f"LLVM {major}: built without regalloc eviction (LLVM's private headers could not be "
                            "had from its apt-verified source package at build time; ci/install.sh says why)")
    litert = _litert()
    if litert["ai_edge_litert"] is None:
        warnings.append(".tflite policies need ai-edge-litert (pip install ai-edge-litert==2.3.0)")
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    try:
        default = _native.default_llvm()
    except Exception as e:  # noqa: BLE001 -- reported, not raised: the doctor only looks
        default = None
        warnings.append(str(e))
    from ..reward import sequence

    try:
        trace_order = str(sequence.tool_path())
    except Exception:  # noqa: BLE001 -- reported as not built
        trace_order = None
    return {
        "mlopt": core.__version__,
        "trace_order": trace_order,
        "python": sys.executable,
        "installed_at": str(_native.native_dir()),
        "default_llvm": default,
        "llvm": majors,
        "on_path": {tool: shutil.which(tool) for tool in ("clang", "opt", "llc")},
        "litert": litert,
        "caches": {"corpora": str(cache_dir()),
                   "llvm_sources": str(Path(cache) / "mlopt" / "llvm-sources")},
        "warnings": warnings,
    }


def _text(facts: dict) -> str:
    def show(value, missing="not built"):
        return missing if value in (None, False) else ("yes" if value is True else str(value))

    lines = [f"mlopt {facts['mlopt']} ({facts['installed_at']}, Python {facts['python']})",
             f"default LLVM: {show(facts['default_llvm'], 'none')}"]
    for major, f in facts["llvm"].items():
        lines.append(f"LLVM {major}:")
        engine = f["llvm_version"] and "LLVM " + f["llvm_version"]
        lines.append(f"  engine:   {show(engine)}")
        lines.append(f"  plugin:   {show(f['plugin'])}")
        regalloc = f["regalloc"] and f"yes (private headers of {f['regalloc']})"
        none = "not built" if int(major) in REGALLOC_MAJORS else "no (LLVM 19 only)"
        lines.append(f"  regalloc: {show(regalloc, none)}")
        lines.append(f"  IR2Vec:   {show(f['ir2vec'], 'no' if f['engine'] else 'not built')}")
        lto = f["lto"] and f"yes (ld.lld-{major}: full LTO and ThinLTO)"
        lines.append(f"  LTO:      {show(lto, 'no (needs the plugin and ld.lld-' + major + ')')}")
        found = [f"{t}-{major}" for t, p in f["tools"].items() if p]
        lines.append(f"  tools:    {' '.join(found) or 'none found'}")
    lines.append("trace reward: block order "
                 + (f"yes ({facts['trace_order']})" if facts["trace_order"] else
                    "not built (install valgrind, then reinstall mlopt)"))
    on_path = ", ".join(f"{t} -> {os.path.realpath(p)}" for t, p in facts["on_path"].items() if p)
    lines.append(f"on PATH: {on_path or 'no clang, opt or llc'}")
    lt = facts["litert"]
    lines.append(f"LiteRT: ai-edge-litert {show(lt['ai_edge_litert'], 'not installed')}, "
                 f"runtime {show(lt['library'], 'not found')}")
    lines.append(f"caches: corpora {facts['caches']['corpora']}, LLVM sources {facts['caches']['llvm_sources']}")
    lines += [f"warning: {w}" for w in facts["warnings"]]
    return "\n".join(lines)


def cmd_doctor(args) -> int:
    facts = collect()
    print(json.dumps(facts, indent=2) if args.json else _text(facts))
    return 1 if args.strict and facts["warnings"] else 0


def register(sub) -> None:
    p = add_command(sub, "doctor", "show what this installation has: per LLVM major, LiteRT, tools, caches",
                    ["mlopt doctor", "mlopt doctor --strict   # status 1 when a part is missing",
                     "mlopt doctor --json | python3 -c 'import json,sys; "
                     "print(json.load(sys.stdin)[\"llvm\"][\"19\"][\"regalloc\"])'"])
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when there is a warning")
    p.set_defaults(func=cmd_doctor)
