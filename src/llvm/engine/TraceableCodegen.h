//===- TraceableCodegen.h - Code generation a trace can be shared by -*- C++ -*-===//
//
// Contract: while a TraceableCodegenScope lives, LLVM's global code
// generation options are those `mlopt reward build-flags` gives clang
// (python/mlopt/reward/flags.py): the basic-block address map with each
// block's successor IDs (-basic-block-address-map, -pgo-analysis-map=br-prob)
// and the passes after register allocation whose CFG changes depend on the
// allocation turned off (-disable-branch-fold, -enable-tail-merge=false,
// -tail-dup-placement=false, -disable-tail-duplicate). The destructor puts
// back the values it found (and clears -pgo-analysis-map's features). The
// caller holds llvmOptionLock() exclusively for the scope's life (the
// options are process-wide). LLVM 19 only (the options' types are LLVM
// 19's); elsewhere, or when this libLLVM lacks one of them, the constructor
// throws CompileError.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_TRACEABLECODEGEN_H
#define MLOPT_LLVM_TRACEABLECODEGEN_H

#include <functional>
#include <vector>

namespace mlopt {

class TraceableCodegenScope {
public:
  TraceableCodegenScope();
  ~TraceableCodegenScope();
  TraceableCodegenScope(const TraceableCodegenScope &) = delete;
  TraceableCodegenScope &operator=(const TraceableCodegenScope &) = delete;

private:
  std::vector<std::function<void()>> Restore; // in reverse order of setting
};

} // namespace mlopt

#endif
