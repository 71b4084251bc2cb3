//===- FunctionPropertiesTable.h - LLVM's FunctionPropertiesInfo per function -*- C++ -*-===//
//
// Contract: for every function defined in a module (module order), the
// FunctionPropertiesInfo LLVM 19 computes (FunctionPropertiesAnalysis, the
// numbers `opt -passes='print<func-properties>'` prints), as a row-major
// table. With Detailed, the "detailed" fields are included (LLVM computes
// them only under -enable-detailed-function-properties; that global option
// is switched on for the call under an exclusive lock, so concurrent
// compiles never see it change). Field names are LLVM's member names.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_FUNCTIONPROPERTIESTABLE_H
#define MLOPT_LLVM_FUNCTIONPROPERTIESTABLE_H

#include <cstdint>
#include <string>
#include <vector>

namespace mlopt {

struct FunctionPropertiesTable {
  std::vector<std::string> Functions;
  std::vector<std::string> Fields;
  std::vector<int64_t> Values; // Functions.size() x Fields.size()
};

FunctionPropertiesTable functionProperties(const std::string &Bitcode, const std::string &Name,
                                           bool Detailed);

} // namespace mlopt

#endif
