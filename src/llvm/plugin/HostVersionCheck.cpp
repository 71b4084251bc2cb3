//===- HostVersionCheck.cpp - The plugin refuses a host of another LLVM major -===//
//
// Contract: before any of the plugin's own static initializers touch LLVM
// (they run later: this constructor has priority 101), checks that the
// process loading the plugin (opt, clang, llc) runs the LLVM major the
// plugin was built for, through LLVM's C API (LLVMGetVersion, exported by
// every libLLVM since 16). A plugin loaded into another major would bind
// that major's symbols with the wrong ABI and crash in its first cl::opt;
// instead it prints one line saying which plugin to use and exits with
// status 1. A host without LLVMGetVersion is not checked.
//
//===----------------------------------------------------------------------===//

#include "llvm/Config/llvm-config.h"

#include <cstdio>
#include <dlfcn.h>
#include <unistd.h>

namespace {

using GetVersionFn = void (*)(unsigned *, unsigned *, unsigned *);

__attribute__((constructor(101))) void checkHostLLVMMajor() {
  auto *GetVersion = reinterpret_cast<GetVersionFn>(dlsym(RTLD_DEFAULT, "LLVMGetVersion"));
  if (!GetVersion)
    return;
  unsigned Major = 0, Minor = 0, Patch = 0;
  GetVersion(&Major, &Minor, &Patch);
  if (Major == LLVM_VERSION_MAJOR)
    return;
  std::fprintf(
      stderr,
      "error: mlopt: this pass plugin is for LLVM %d, but the compiler loading it runs LLVM "
      "%u.%u.%u; use LLVM %u's plugin: mlopt plugin-path --llvm %u (or mlopt clang-flags "
      "--llvm %u)\n",
      LLVM_VERSION_MAJOR, Major, Minor, Patch, Major, Major, Major);
  std::fflush(stderr);
  _exit(1);
}

} // namespace
