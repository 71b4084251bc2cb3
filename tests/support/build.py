"""A small real build for corpus tests (see the ``mini_build`` fixture)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.corpus import c_sources, include_flags

CXX_SHAPES = r"""
#include <memory>
#include <string>
#include <vector>
struct Shape { virtual ~Shape() = default; virtual double area() const = 0; };
struct Rect : Shape {
  double w, h;
  Rect(double w, double h) : w(w), h(h) {}
  double area() const override { return w * h; }
};
struct Circle : Shape {
  double r;
  explicit Circle(double r) : r(r) {}
  double area() const override { return 3.14159 * r * r; }
};
std::vector<std::unique_ptr<Shape>> make(int n) {
  std::vector<std::unique_ptr<Shape>> v;
  for (int i = 0; i < n; ++i) {
    if (i % 2) v.push_back(std::make_unique<Rect>(i, i + 1)); else v.push_back(std::make_unique<Circle>(i));
  }
  return v;
}
double total(const std::vector<std::unique_ptr<Shape>> &v) { double t = 0; for (auto &s : v) t += s->area(); return t; }
std::string describe(int n) { return "shapes: " + std::to_string(n) + " total " + std::to_string(total(make(n))); }
"""

CXX_TABLE = r"""
#include <algorithm>
#include <map>
#include <string>
std::map<std::string, int> counts(const std::string &text) {
  std::map<std::string, int> m; std::string word;
  for (char c : text) { if (c == ' ') { if (!word.empty()) ++m[word]; word.clear(); } else word += c; }
  if (!word.empty()) ++m[word];
  return m;
}
int most(const std::string &text) {
  auto m = counts(text); int best = 0;
  for (auto &[k, v] : m) best = std::max(best, v);
  return best;
}
"""

ASM = """
    .text
    .globl asm_add
asm_add:
    lea (%rdi,%rsi), %rax
    ret
    .section .note.GNU-stack,"",@progbits
"""


@dataclass
class Build:
    directory: Path
    compile_commands: Path
    objects: list[Path]  # objects with bitcode, in compile_commands order
    asm_object: Path
    odd_object: Path  # built from a source whose file name is not UTF-8


def build_project(root: Path) -> Build:
    src = root / "src"
    src.mkdir()
    sources = []
    for s in c_sources("lz4")[:3]:
        shutil.copy(s, src / s.name)
        sources.append((src / s.name, "clang-19", include_flags("lz4")))
    for name, text in (("shapes.cpp", CXX_SHAPES), ("table.cpp", CXX_TABLE)):
        (src / name).write_text(text)
        sources.append((src / name, "clang++-19", ["-std=c++17"]))
    odd = Path(os.fsdecode(bytes(src) + b"/odd\xff.c"))
    odd.write_text("static int twice(int x) { return 2 * x; }\nint odd(int y) { return twice(y) + twice(y + 1); }\n")
    sources.append((odd, "clang-19", []))
    entries, objects = [], []
    for path, compiler, flags in sources:
        obj = f"obj/{path.name}.o"
        args = [compiler, "-Oz", *flags, "-Xclang", "-fembed-bitcode=all", "-c", str(path), "-o", obj]
        (root / "obj").mkdir(exist_ok=True)
        subprocess.run(args, cwd=root, check=True)
        entries.append({"directory": str(root), "file": os.fsdecode(path), "arguments": args})
        objects.append(root / obj)
    (src / "add.S").write_text(ASM)
    asm_args = ["clang-19", "-c", str(src / "add.S"), "-o", "obj/add.o"]
    subprocess.run(asm_args, cwd=root, check=True)
    entries.append({"directory": str(root), "file": str(src / "add.S"), "command": " ".join(asm_args)})
    cc = root / "compile_commands.json"
    cc.write_text(json.dumps(entries, indent=2))
    return Build(root, cc, objects, root / "obj" / "add.o", objects[-1])
