import os
import shutil
import subprocess
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI (ci/install.sh installs LLVM 19)")
        pytest.skip(f"{name} not installed (run ci/install.sh)")
    return path


@pytest.fixture(scope="session")
def llvm_tools():
    """Paths of the real Debian LLVM 19 tools."""
    names = ["opt-19", "clang-19", "llc-19", "llvm-config-19"]
    return {n.removesuffix("-19"): _tool(n) for n in names}


@pytest.fixture(scope="session")
def llvm_logger_oracle(llvm_tools, tmp_path_factory):
    """Builds tests/oracle/llvm_logger_oracle.cpp against libLLVM-19."""
    cfg = llvm_tools["llvm-config"]
    cxxflags = subprocess.check_output([cfg, "--cxxflags"], text=True).split()
    libdir = subprocess.check_output([cfg, "--libdir"], text=True).strip()
    out = tmp_path_factory.mktemp("oracle") / "llvm_logger_oracle"
    src = Path(__file__).parent / "oracle" / "llvm_logger_oracle.cpp"
    cxx = shutil.which("clang++-19") or shutil.which("g++") or _tool("c++")
    subprocess.run(
        [cxx, "-std=c++17", "-O1", str(src), *cxxflags, "-o", str(out),
         f"-L{libdir}", "-lLLVM-19", f"-Wl,-rpath,{libdir}"],
        check=True,
    )
    return out


@pytest.fixture(scope="session")
def corpus_modules(llvm_tools, tmp_path_factory):
    """Pre-optimization bitcode of real C code (lz4 + brotli sdists, 35 modules)."""
    from tests.support.corpus import corpus

    return corpus(llvm_tools["clang"], tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def plugin(llvm_tools):
    from mlopt.compiler.plugin import plugin_path
    from mlopt.errors import PluginNotFoundError

    try:
        return plugin_path()
    except PluginNotFoundError as e:
        if IN_CI:
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def mini_build(llvm_tools, tmp_path_factory):
    """A small real project built as a user would for a corpus: lz4's C
    sources and two C++ files with -Oz -Xclang -fembed-bitcode=all, one
    assembly object (no bitcode), one source whose name is not UTF-8, and
    the compile_commands.json of the build."""
    from tests.support.build import build_project

    return build_project(llvm_tools, tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def mini_corpus(mini_build, tmp_path_factory):
    """mlopt's corpus of mini_build."""
    from mlopt.corpus import extract_corpus, objects_from_compile_commands

    out = tmp_path_factory.mktemp("mini") / "corpus"
    extract_corpus(objects_from_compile_commands(mini_build.compile_commands), out)
    return out


# Markers follow from what a test uses, so they cannot drift from the code:
# the real LLVM tools or the engine -> llvm; the sdist corpus -> network.
_LLVM_FIXTURES = {"llvm_tools", "plugin", "llvm_logger_oracle"}
_NETWORK_FIXTURES = {"corpus_modules", "lz4_module", "mini_build", "mini_corpus"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & _LLVM_FIXTURES or used & _NETWORK_FIXTURES:
            item.add_marker(pytest.mark.llvm)
        if used & _NETWORK_FIXTURES:
            item.add_marker(pytest.mark.network)


def pytest_runtest_setup(item):
    """An llvm test without mlopt's LLVM parts: skipped, or failed in CI."""
    if item.get_closest_marker("llvm") is None:
        return
    from mlopt import _native

    if _native.plugin_library() is None:
        message = f"mlopt was built without LLVM 19 ({_native.rebuild_hint()})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
