//===- LinkCommandLine.h - What the host link was asked to do --*- C++ -*-===//
//
// Contract: linkCommandLine() reads, once per process (thread-safe), the
// command line of the process the plugin runs in from /proc/self/cmdline,
// response files (@file) expanded as LLVM's tools expand them, and says
// what an lld link (or a clang running a distributed ThinLTO backend) was
// asked for, as lld decides it:
//  - Output: the last "-o FILE", "--output=FILE" or "--output FILE"
//    ("a.out" when there is none or the command line cannot be read);
//  - Shared: a shared library (-shared, --shared, -Bshareable);
//  - Pic: position-independent code, lld's isPic: -shared, or -pie
//    (--pic-executable) unless a later -no-pie (--no-pic-executable);
//  - LTOLevel: the LTO optimization level, the last --lto-O<n>,
//    -plugin-opt=O<n> or --plugin-opt=O<n> (2 when none);
//  - Linker: the process is lld (its executable is lld or ld.lld*), where
//    modules are link-time modules.
// The plugin names link-time training logs after Output (TrainingLogPath.h)
// and records the other facts with the LTO modules it saves.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PLUGIN_LINKCOMMANDLINE_H
#define MLOPT_PLUGIN_LINKCOMMANDLINE_H

#include <string>

namespace mlopt {

struct LinkCommandLine {
  std::string Output = "a.out";
  bool Shared = false;
  bool Pic = false;
  int LTOLevel = 2;
  bool Linker = false;
};

const LinkCommandLine &linkCommandLine();

} // namespace mlopt

#endif
