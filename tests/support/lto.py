"""The example CMake project built by hand with LTO, as three binaries (a C
static library in two of them): compile once per LTO mode, then link as often
as a test needs, with whatever the link should add (the plugin's flags)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mlopt.compiler.plugin import wl_flags

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cmake-project"

# binary: (its own sources, link the cutil archive, shared library, C++)
BINARIES = {
    "libgeom.so": (["geom/src/shape.cpp", "geom/src/polygon.cpp", "geom/src/stats.cpp", "geom/src/report.cpp"],
                   True, True, True),
    "shapes": (["app/main.cpp"], False, False, True),
    "cksum": (["tools/cksum.c"], True, False, False),
}
CUTIL = ["cutil/checksum.c", "cutil/strbuf.c"]
INCLUDES = ["-I", str(EXAMPLE / "cutil"), "-I", str(EXAMPLE / "geom" / "include")]


def _run(cmd, cwd):
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))}\n{result.stderr}")
    return result


@dataclass
class LtoBuild:
    """The objects of one LTO mode, compiled by stock clang; `link` makes the binaries."""

    root: Path
    mode: str  # "full" or "thin"
    major: int
    objects: dict[str, list[Path]] = field(default_factory=dict)

    def compile(self, *flags: str) -> LtoBuild:
        obj = self.root / "obj"
        obj.mkdir(parents=True, exist_ok=True)
        for source in CUTIL + [s for sources, *_ in BINARIES.values() for s in sources]:
            compiler = f"clang++-{self.major}" if source.endswith(".cpp") else f"clang-{self.major}"
            out = obj / (Path(source).name + ".o")
            _run([compiler, "-Oz", "-fPIC", f"-flto={self.mode}", *INCLUDES, *flags, "-c", EXAMPLE / source,
                  "-o", out], cwd=self.root)
        archive = obj / "libcutil.a"
        archive.unlink(missing_ok=True)
        _run([f"llvm-ar-{self.major}", "rcs", archive, *(obj / (Path(s).name + ".o") for s in CUTIL)], cwd=self.root)
        return self

    def copy(self, root: Path) -> LtoBuild:
        """The same objects under `root` (links with --save-temps write next to their inputs)."""
        shutil.copytree(self.root / "obj", root / "obj")
        return LtoBuild(root, self.mode, self.major)

    def link(self, out: Path, *flags: str, only: tuple[str, ...] = ()) -> dict[str, Path]:
        """The three binaries (or `only` these) in `out` (created), linked by clang + lld with
        `flags` (lld's own flags, passed through -Wl,); the link runs in `out`, so link-time
        logs are relative to it."""
        out.mkdir(parents=True, exist_ok=True)
        obj = self.root / "obj"
        wl = wl_flags(list(flags))
        built = {}
        for name in only or ("libgeom.so", "shapes", "cksum"):  # shapes links libgeom.so
            sources, with_cutil, shared, cxx = BINARIES[name]
            cmd = [f"clang++-{self.major}" if cxx else f"clang-{self.major}", "-Oz", f"-flto={self.mode}",
                   "-fuse-ld=lld", *(["-shared"] if shared else []),
                   *(obj / (Path(s).name + ".o") for s in sources), *([obj / "libcutil.a"] if with_cutil else []),
                   *(["-L", out, "-lgeom"] if name == "shapes" else []), *wl, "-o", name]
            _run(cmd, cwd=out)
            built[name] = out / name
        return built


def lto_build(tmp_path: Path, mode: str, major: int, *compile_flags: str) -> LtoBuild:
    if shutil.which(f"ld.lld-{major}") is None or shutil.which(f"llvm-ar-{major}") is None:
        raise FileNotFoundError(f"ld.lld-{major} / llvm-ar-{major}")
    return LtoBuild(tmp_path, mode, major).compile(*compile_flags)
