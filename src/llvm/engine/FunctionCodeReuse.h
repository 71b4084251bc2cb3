//===- FunctionCodeReuse.h - code generation only where IR changed -*- C++ -*-===//
//
// Contract: lets a compile generate machine code only for the functions
// whose optimized IR (and everything code generation reads of it) changed
// since an earlier compile, with the object's .text size exactly that of a
// full code generation.
//
// A function's key hashes its printed IR with, resolved, what the printed
// text only names: attribute groups, metadata nodes, named types, the
// globals and functions it references (their declarations, initializers)
// and the module's target, data layout, flags and code generation options.
// FunctionCodeCache maps keys to the function's code size in the object.
//
// planReuse() replaces the body of every function found in the cache by a
// stub of exactly its size (a naked function holding `.skip N`, same
// attributes, linkage, section and alignment), so the module's layout -- and
// so every branch the assembler relaxes -- is the full compile's. It leaves
// alone (always compiled, never stubbed): functions without minsize (their
// blocks may be aligned, which makes their size depend on their address),
// with prefix or prologue data, patchable entries or KCFI, with private
// linkage (no symbol), whose blocks have their address taken, with inline
// asm (it may align: zstd's `.p2align 5` inside its loops); and whole
// modules with debug info or module-level asm. A function learns its size
// from an object only if its code has no branch that the assembler
// resolved to outside the function (a jump whose length depends on the
// layout; calls and relocated branches have a fixed length) and the bytes
// between functions are alignment padding.
//
// learnFromObject() checks every stub's symbol has its size (false: the
// caller must compile again without stubs) and caches the compiled
// functions that qualify. ELF objects only (others: no reuse).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_FUNCTIONCODEREUSE_H
#define MLOPT_LLVM_FUNCTIONCODEREUSE_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace mlopt {

class FunctionCodeCache {
public:
  using Key = std::pair<uint64_t, uint64_t>;

  std::optional<uint64_t> lookup(const Key &K) const;
  void insert(const Key &K, uint64_t Size);

  size_t size() const;
  /// Functions stubbed (reused) and functions compiled in compiles that
  /// used the cache; compiles redone without stubs after a check failed.
  uint64_t reused() const;
  uint64_t compiled() const;
  uint64_t redone() const;
  void count(uint64_t Reused, uint64_t Compiled, bool Redone);

private:
  mutable std::mutex Lock;
  std::map<Key, uint64_t> Sizes;
  uint64_t Reused = 0, Compiled = 0, Redone = 0;
};

/// What planReuse() did to one module.
struct ReusePlan {
  struct Entry {
    std::string Symbol;
    FunctionCodeCache::Key Key;
    std::optional<uint64_t> StubSize; // set: stubbed with this size
  };
  std::vector<Entry> Functions; // the eligible ones
  bool Enabled = false;
  unsigned stubs() const;
};

/// Keys the module's functions and stubs those the cache knows. Call on the
/// optimized module right before code generation with the code generation
/// target machine; Options is the caller's own description of the code
/// generation options (hashed into every key). Without Stub, only keys
/// (the compile learns, reuses nothing).
ReusePlan planReuse(llvm::Module &M, const llvm::TargetMachine &TM, const std::string &Options,
                    const FunctionCodeCache &Cache, bool Stub = true);

/// See the contract above. Returns false when a stub's size is not its
/// symbol's (nothing was learned).
bool learnFromObject(llvm::StringRef Object, const ReusePlan &Plan, const llvm::TargetMachine &TM,
                     FunctionCodeCache &Cache);

} // namespace mlopt

#endif
