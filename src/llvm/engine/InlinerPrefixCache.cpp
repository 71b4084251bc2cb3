#include "InlinerPrefixCache.h"
#include "InProcessCompiler.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/xxhash.h"

namespace mlopt {

InlinerPrefixCache::Key InlinerPrefixCache::key(const std::string &Bitcode,
                                                const CompileOptions &Options) {
  // Separated so that no two different inputs concatenate alike; the code
  // generation level and the inliner's inputs (decisions, vocabulary) do not
  // reach the passes before the inliner.
  llvm::XXH128_hash_t Input = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Bitcode.data()), Bitcode.size()));
  std::string Text = "inliner-prefix:"; // never a TextSizeCache key
  Text += std::to_string(Input.low64) + ':' + std::to_string(Input.high64) + '\0';
  Text += Options.Pipeline + '\0' + Options.TargetTriple + '\0' + Options.RelocModel + '\0';
  Text += std::to_string(Options.LoopVectorize) + ',' + std::to_string(Options.SLPVectorize);
  llvm::XXH128_hash_t H = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
  return {H.low64, H.high64};
}

static uint64_t weight(const InlinerPrefix &P) {
  uint64_t W = P.Bitcode.size();
  for (const std::string &S : P.Warnings)
    W += S.size();
  return W;
}

std::shared_ptr<const InlinerPrefix> InlinerPrefixCache::lookup(const Key &K) {
  std::lock_guard<std::mutex> Guard(Lock);
  auto It = Entries.find(K);
  if (It == Entries.end()) {
    ++Misses;
    return nullptr;
  }
  ++Hits;
  Recent.splice(Recent.begin(), Recent, It->second.Position);
  return It->second.Prefix;
}

void InlinerPrefixCache::insert(const Key &K, InlinerPrefix Prefix) {
  uint64_t W = weight(Prefix);
  std::lock_guard<std::mutex> Guard(Lock);
  if (W > Capacity || Entries.count(K))
    return;
  Recent.push_front(K);
  Entries.emplace(K,
                  Entry{std::make_shared<const InlinerPrefix>(std::move(Prefix)), Recent.begin()});
  Bytes += W;
  while (Bytes > Capacity) {
    auto Oldest = Entries.find(Recent.back());
    Bytes -= weight(*Oldest->second.Prefix);
    Entries.erase(Oldest);
    Recent.pop_back();
  }
}

size_t InlinerPrefixCache::size() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Entries.size();
}

uint64_t InlinerPrefixCache::bytes() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Bytes;
}

uint64_t InlinerPrefixCache::hits() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Hits;
}

uint64_t InlinerPrefixCache::misses() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Misses;
}

} // namespace mlopt
