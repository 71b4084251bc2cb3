//===- InlinerPrefixCache.h - the optimizer's work before the inliner -*- C++ -*-===//
//
// Contract: keeps, per (input bitcode, the options the optimizer sees), the
// module as it is when the pipeline's inliner (the first
// ModuleInlinerWrapperPass) starts, as bitcode, with the warnings LLVM
// raised before that point. No pass before the inliner asks the inline
// advisor, so this module is the same for every policy: a later compile of
// the same input and options parses it instead of the input and skips the
// passes before the inliner (InlinerPrefixSkip.h). The compile's result is
// byte for byte the full compile's (checked on the corpus by
// benchmarks/bench_rollouts.py and tests/test_rollout_cache.py).
//
// Holds at most CapacityBytes of bitcode; the least recently used entries
// are dropped first; 0 keeps nothing. Thread-safe. hits()/misses() count
// lookups, bytes() what is held.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINERPREFIXCACHE_H
#define MLOPT_LLVM_INLINERPREFIXCACHE_H

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlopt {

struct CompileOptions;

/// A module at the inliner's start, and the warnings raised before it.
struct InlinerPrefix {
  std::string Bitcode;
  std::vector<std::string> Warnings;
};

class InlinerPrefixCache {
public:
  using Key = std::pair<uint64_t, uint64_t>;

  explicit InlinerPrefixCache(uint64_t CapacityBytes) : Capacity(CapacityBytes) {}

  /// Every input of the optimizer before its inliner: the bitcode, the
  /// pipeline, the target and relocation model, the vectorizer options.
  static Key key(const std::string &Bitcode, const CompileOptions &Options);

  std::shared_ptr<const InlinerPrefix> lookup(const Key &K);
  void insert(const Key &K, InlinerPrefix Prefix);

  uint64_t capacity() const { return Capacity; }
  size_t size() const;
  uint64_t bytes() const;
  uint64_t hits() const;
  uint64_t misses() const;

private:
  using Order = std::list<Key>; // most recently used first
  struct Entry {
    std::shared_ptr<const InlinerPrefix> Prefix;
    Order::iterator Position;
  };
  uint64_t Capacity;
  mutable std::mutex Lock;
  std::map<Key, Entry> Entries;
  Order Recent;
  uint64_t Bytes = 0, Hits = 0, Misses = 0;
};

} // namespace mlopt

#endif
