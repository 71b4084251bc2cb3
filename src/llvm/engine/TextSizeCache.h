//===- TextSizeCache.h - .text sizes of compiles already made ---*- C++ -*-===//
//
// Contract: maps (input bitcode, compile options, the inliner's decision
// sequence) -- hashed to 128 bits (xxh3) -- to the .text size code
// generation produced. LLVM is deterministic: the same input, options and
// decisions give the same optimized module, so the size is the same and
// code generation can be skipped. With CompileOptions::GroupedCode (part of
// the key) an entry also keeps the object's grouped code sections
// (ObjectTextSize.h). Thread-safe; holds at most Capacity
// entries (the oldest are dropped first). hits()/misses() count lookups.
//
// With PerFunction, a compile that misses also reuses machine code per
// function (FunctionCodeReuse.h): only functions whose optimized IR is new
// are generated, and the size is still the full compile's.
//
// With PrefixBytes > 0, compiles also keep the module as the passes before
// the inliner leave it (InlinerPrefixCache.h), up to that many bytes, and
// later compiles of the same input and options start from it.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_TEXTSIZECACHE_H
#define MLOPT_LLVM_TEXTSIZECACHE_H

#include "FunctionCodeReuse.h"
#include "InlinerPrefixCache.h"
#include "ObjectTextSize.h"

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace mlopt {

struct CompileOptions;

class TextSizeCache {
public:
  using Key = std::pair<uint64_t, uint64_t>;

  explicit TextSizeCache(size_t Capacity = 1 << 20, bool PerFunction = true,
                         uint64_t PrefixBytes = 0)
      : Capacity(Capacity), PerFunction(PerFunction), Prefixes(PrefixBytes) {}

  static Key key(const std::string &Bitcode, const CompileOptions &Options,
                 const std::string &Decisions);

  std::optional<ObjectCodeSize> lookup(const Key &K);
  void insert(const Key &K, const ObjectCodeSize &Size);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;

  bool perFunction() const { return PerFunction; }
  FunctionCodeCache &functions() { return Functions; }
  InlinerPrefixCache &prefixes() { return Prefixes; }

private:
  size_t Capacity;
  bool PerFunction;
  FunctionCodeCache Functions;
  InlinerPrefixCache Prefixes;
  mutable std::mutex Lock;
  std::map<Key, ObjectCodeSize> Sizes;
  std::deque<Key> Order;
  uint64_t Hits = 0, Misses = 0;
};

} // namespace mlopt

#endif
