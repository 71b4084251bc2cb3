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
            pytest.fail(f"{name} is required in CI (ci/install.sh installs LLVM 19 and 22)")
        pytest.skip(f"{name} not installed (run ci/install.sh)")
    return path


# Every test that uses the real LLVM tools runs once per LLVM major mlopt
# supports (the conformance suite for 19 and 22); the engine, the plugin and
# the tools of one run are that major's. Tests that do not ask for a major
# use LLVM 19.
from mlopt._native import LLVM_MAJORS  # noqa: E402

DEFAULT_TEST_MAJOR = 19
os.environ["MLOPT_LLVM"] = str(DEFAULT_TEST_MAJOR)


@pytest.fixture(scope="session", params=LLVM_MAJORS, ids=[f"llvm{m}" for m in LLVM_MAJORS])
def llvm_major(request):
    """One supported LLVM major. A test's body runs with $MLOPT_LLVM set to
    it (_llvm_of_this_test); fixtures wider than a test pass it explicitly
    (llvm=...), since they are set up before that."""
    major = request.param
    from mlopt import _native

    if major not in _native.built_majors():
        message = f"mlopt was built without LLVM {major} ({_native.rebuild_hint(major)})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return major


@pytest.fixture(autouse=True)
def _llvm_of_this_test(request, monkeypatch):
    """A test's body (and the worker processes it starts) sees the major it
    runs for: LLVM 19 unless it is parametrized by llvm_major."""
    callspec = getattr(request.node, "callspec", None)
    major = callspec.params.get("llvm_major", DEFAULT_TEST_MAJOR) if callspec else DEFAULT_TEST_MAJOR
    monkeypatch.setenv("MLOPT_LLVM", str(major))


@pytest.fixture(scope="session")
def llvm_tools(llvm_major):
    """Paths of the real Debian LLVM tools of one major (keys without the
    suffix: opt, clang, clang++, llc, llvm-config, llvm-size), and "major"."""
    names = ["opt", "clang", "clang++", "llc", "llvm-config", "llvm-size"]
    tools = {n: _tool(f"{n}-{llvm_major}") for n in names}
    tools["major"] = llvm_major
    return tools


@pytest.fixture(scope="session")
def llvm_logger_oracle(llvm_tools, tmp_path_factory):
    """Builds tests/oracle/llvm_logger_oracle.cpp against the major's libLLVM."""
    cfg = llvm_tools["llvm-config"]
    cxxflags = subprocess.check_output([cfg, "--cxxflags"], text=True).split()
    libdir = subprocess.check_output([cfg, "--libdir"], text=True).strip()
    out = tmp_path_factory.mktemp("oracle") / "llvm_logger_oracle"
    src = Path(__file__).parent / "oracle" / "llvm_logger_oracle.cpp"
    cxx = llvm_tools["clang++"]
    subprocess.run(
        [cxx, "-std=c++17", "-O1", str(src), *cxxflags, "-o", str(out),
         f"-L{libdir}", f"-lLLVM-{llvm_tools['major']}", f"-Wl,-rpath,{libdir}"],
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
        return plugin_path(llvm_tools["major"])
    except PluginNotFoundError as e:
        if IN_CI:
            pytest.fail(str(e))
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def mini_build(tmp_path_factory):
    """A small real project built as a user would for a corpus: lz4's C
    sources and two C++ files with -Oz -Xclang -fembed-bitcode=all, one
    assembly object (no bitcode), one source whose name is not UTF-8, and
    the compile_commands.json of the build. Built by clang-19: the corpus,
    rollout and training tests it feeds are not per LLVM major."""
    from tests.support.build import build_project

    _tool("clang-19")
    return build_project(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def mini_corpus(mini_build, tmp_path_factory):
    """mlopt's corpus of mini_build."""
    from mlopt.corpus import extract_corpus, objects_from_compile_commands

    out = tmp_path_factory.mktemp("mini") / "corpus"
    extract_corpus(objects_from_compile_commands(mini_build.compile_commands), out)
    return out


@pytest.fixture(scope="session")
def mini_default_sites(mini_corpus):
    """(modules, batch, vocab) of the mini corpus compiled at -Oz: the
    inlining-default problem's features of every logged call site, and a
    50-bucket vocab of them."""
    import numpy as np

    import mlopt
    from mlopt.problems import get

    names = get("inlining-default").feature_names
    modules = mlopt.load_corpus(mini_corpus)
    logs = [mlopt.compile(m).log for m in modules]
    vocab = mlopt.Vocab.from_logs(logs, num_buckets=50, features=names)
    batch = {n: np.concatenate([lg[n] for lg in logs if lg is not None]) for n in names}
    return modules, batch, vocab


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

    if _native.plugin_library(DEFAULT_TEST_MAJOR) is None:
        message = f"mlopt was built without LLVM {DEFAULT_TEST_MAJOR} ({_native.rebuild_hint(DEFAULT_TEST_MAJOR)})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
