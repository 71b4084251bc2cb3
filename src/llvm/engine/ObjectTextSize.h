//===- ObjectTextSize.h - Native code size of an object file ----*- C++ -*-===//
//
// Contract: the size in bytes of an object file's executable code: the sum
// of the sizes of its sections named ".text" or ".text.<suffix>" (ELF,
// -ffunction-sections included), "__text" (Mach-O) or ".text$<suffix>"
// (COFF) -- what `llvm-size -A` lists for those sections. Throws
// CompileError naming the object when it cannot be read.
//
// objectCodeSize() also lists, on request, the code sections that are
// members of a section group (ELF SHF_GROUP: COMDAT, e.g. C++ inline
// functions and template instances), which a linker keeps once per name
// however many objects bring one: each as the xxh3-64 hash of its section
// name and its size, in section order. Other formats list none.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_OBJECTTEXTSIZE_H
#define MLOPT_LLVM_OBJECTTEXTSIZE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlopt {

uint64_t objectTextSize(llvm::StringRef Object, const std::string &Name);

/// A code section in a section group: its name's xxh3-64 hash, its bytes.
struct GroupedCode {
  uint64_t NameHash = 0;
  uint64_t Size = 0;
  bool operator==(const GroupedCode &O) const { return NameHash == O.NameHash && Size == O.Size; }
};

struct ObjectCodeSize {
  uint64_t Text = 0;                // objectTextSize()
  std::vector<GroupedCode> Grouped; // empty unless asked for
};

ObjectCodeSize objectCodeSize(llvm::StringRef Object, const std::string &Name, bool Grouped);

/// Whether a section of that name counts as executable code (see above).
bool isTextSectionName(llvm::StringRef Name);

} // namespace mlopt

#endif
