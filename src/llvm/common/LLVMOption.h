//===- LLVMOption.h - One of LLVM's own registered options -------*- C++ -*-===//
//
// Contract: findLLVMOption<T>(Name) is LLVM's registered cl::opt<T> named
// Name (as on the command line, without '-'), or nullptr when this libLLVM
// has no such option. The caller names the type the option has in LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_LLVMOPTION_H
#define MLOPT_LLVM_LLVMOPTION_H

#include "llvm/Support/CommandLine.h"

namespace mlopt {

template <typename T> llvm::cl::opt<T> *findLLVMOption(const char *Name) {
  auto &Options = llvm::cl::getRegisteredOptions();
  auto It = Options.find(Name);
  return It == Options.end() ? nullptr : static_cast<llvm::cl::opt<T> *>(It->second);
}

} // namespace mlopt

#endif
