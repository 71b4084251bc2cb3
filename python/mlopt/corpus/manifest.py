"""``corpus_manifest.json``: what a corpus is made of, beside its
``corpus_description.json`` (which stays in mlgo-utils' layout).

    {"format": 1, "source": "debian" | "pypi", "compiler": "clang-19 (19.1.7)",
     "flags": [...], "excluded": ["pkg", ...],
     "packages": [{"name": "zlib", "version": "1:1.2.13.dfsg-1", "status": "built",
                   "source_sha256": "...", "modules": 40, "text": 91234,
                   "languages": {"c": {"modules": 40, "text": 91234}},
                   "build_seconds": 21.3, "domain": "compression"},
                  {"name": "foo", "version": "...", "status": "failed",
                   "stage": "build", "reason": "last lines of its log"}]}

``text`` is the ``.text`` bytes of the package's objects as its build made
them (``-Oz``). :func:`manifest_table` is ``mlopt corpus stats``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import CorpusError

MANIFEST = "corpus_manifest.json"
FORMAT = 1


def read_manifest(directory: str | os.PathLike) -> dict | None:
    """The corpus's manifest, or None when it has none."""
    path = Path(directory) / MANIFEST
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorpusError(f"{path}: unreadable manifest: {e}") from None
    packages = data.get("packages") if isinstance(data, dict) else None
    if not isinstance(packages, list) or not all(isinstance(p, dict) and isinstance(p.get("name"), str)
                                                 for p in packages):
        raise CorpusError(f"{path}: expected an object with a 'packages' list of objects with a 'name'")
    if data.get("format", FORMAT) != FORMAT:
        raise CorpusError(f"{path}: manifest format {data.get('format')!r}, this mlopt reads {FORMAT}")
    return data


def write_manifest(directory: str | os.PathLike, manifest: dict) -> Path:
    path = Path(directory) / MANIFEST
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps({"format": FORMAT, **manifest}, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def built(manifest: dict) -> list[dict]:
    return [p for p in manifest["packages"] if p.get("status") == "built"]


def language_totals(manifest: dict) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for p in built(manifest):
        for lang, t in (p.get("languages") or {}).items():
            acc = totals.setdefault(lang, {"modules": 0, "text": 0})
            acc["modules"] += int(t.get("modules", 0))
            acc["text"] += int(t.get("text", 0))
    return totals


def summary(manifest: dict) -> dict:
    """Totals: packages attempted/built/failed, modules, .text, language
    shares, the largest package's share of .text."""
    ok = built(manifest)
    text = sum(int(p.get("text", 0)) for p in ok)
    langs = language_totals(manifest)
    largest = max(ok, key=lambda p: int(p.get("text", 0)), default=None)
    return {
        "packages": len(manifest["packages"]), "built": len(ok),
        "failed": [{"name": p["name"], "stage": p.get("stage"), "reason": p.get("reason")}
                   for p in manifest["packages"] if p.get("status") != "built"],
        "modules": sum(int(p.get("modules", 0)) for p in ok), "text": text,
        "languages": {k: {**v, "share": v["text"] / text if text else 0.0} for k, v in sorted(langs.items())},
        "largest": None if largest is None else {"name": largest["name"],
                                                 "share": int(largest.get("text", 0)) / text if text else 0.0},
        "build_seconds": round(sum(float(p.get("build_seconds", 0)) for p in manifest["packages"]), 1),
        "cpu_seconds": round(sum(float(p.get("cpu_seconds", 0)) for p in manifest["packages"]), 1),
        "excluded": manifest.get("excluded", []),
    }


def manifest_table(manifest: dict) -> str:
    """Per package and per language: modules, ``.text`` and its share."""
    s = summary(manifest)
    total = s["text"] or 1
    rows = [("package", "version", "modules", ".text", "share", "C/C++", "build s")]
    for p in sorted(built(manifest), key=lambda p: -int(p.get("text", 0))):
        langs = p.get("languages") or {}
        mix = "/".join(f"{100 * int(langs.get(k, {}).get('text', 0)) / max(int(p.get('text', 0)), 1):.0f}"
                       for k in ("c", "c++"))
        rows.append((p["name"], str(p.get("version", "")), str(p.get("modules", 0)), str(p.get("text", 0)),
                     f"{100 * int(p.get('text', 0)) / total:.1f}%", mix, f"{float(p.get('build_seconds', 0)):.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.append("")
    for lang, t in s["languages"].items():
        lines.append(f"{lang:4} {t['modules']:6} modules  {t['text']:10} bytes of .text  {100 * t['share']:.1f}%")
    lines.append(f"all  {s['modules']:6} modules  {s['text']:10} bytes of .text  from {s['built']} of "
                 f"{s['packages']} packages; largest: "
                 + ("-" if s["largest"] is None else f"{s['largest']['name']} {100 * s['largest']['share']:.1f}%"))
    for f in s["failed"]:
        lines.append(f"failed: {f['name']} ({f['stage']}): {f['reason']}")
    if s["excluded"]:
        lines.append("excluded: " + ", ".join(s["excluded"]))
    return "\n".join(lines)
