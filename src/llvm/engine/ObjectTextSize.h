//===- ObjectTextSize.h - Native code size of an object file ----*- C++ -*-===//
//
// Contract: the size in bytes of an object file's executable code: the sum
// of the sizes of its sections named ".text" or ".text.<suffix>" (ELF,
// -ffunction-sections included), "__text" (Mach-O) or ".text$<suffix>"
// (COFF) -- what `llvm-size -A` lists for those sections. Throws
// CompileError naming the object when it cannot be read.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_OBJECTTEXTSIZE_H
#define MLOPT_LLVM_OBJECTTEXTSIZE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlopt {

uint64_t objectTextSize(llvm::StringRef Object, const std::string &Name);

/// Whether a section of that name counts as executable code (see above).
bool isTextSectionName(llvm::StringRef Name);

} // namespace mlopt

#endif
