#include "TextSizeCache.h"
#include "InProcessCompiler.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/xxhash.h"

namespace mlopt {

TextSizeCache::Key TextSizeCache::key(const std::string &Bitcode, const CompileOptions &Options,
                                      const std::string &Decisions) {
  // Every field that changes the optimized module or its code generation,
  // separated so that no two different inputs concatenate alike.
  std::string Text;
  llvm::XXH128_hash_t Input = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Bitcode.data()), Bitcode.size()));
  Text += std::to_string(Input.low64) + ':' + std::to_string(Input.high64) + '\0';
  Text += Options.Pipeline + '\0' + std::to_string(Options.CodeGenLevel) + '\0';
  Text += Options.TargetTriple + '\0' + Options.RelocModel + '\0';
  Text += std::to_string(Options.LoopVectorize) + ',' + std::to_string(Options.SLPVectorize) + '\0';
  Text += Options.GroupedCode ? "grouped\0" : "\0";
  Text += Options.LinkTimeCodegen ? "link-time\0" : "\0";
  Text += Decisions;
  llvm::XXH128_hash_t H = llvm::xxh3_128bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
  return {H.low64, H.high64};
}

std::optional<ObjectCodeSize> TextSizeCache::lookup(const Key &K) {
  std::lock_guard<std::mutex> Guard(Lock);
  auto It = Sizes.find(K);
  if (It == Sizes.end()) {
    ++Misses;
    return std::nullopt;
  }
  ++Hits;
  return It->second;
}

void TextSizeCache::insert(const Key &K, const ObjectCodeSize &Size) {
  std::lock_guard<std::mutex> Guard(Lock);
  if (!Sizes.emplace(K, Size).second)
    return;
  Order.push_back(K);
  while (Order.size() > Capacity) {
    Sizes.erase(Order.front());
    Order.pop_front();
  }
}

size_t TextSizeCache::size() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Sizes.size();
}

uint64_t TextSizeCache::hits() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Hits;
}

uint64_t TextSizeCache::misses() const {
  std::lock_guard<std::mutex> Guard(Lock);
  return Misses;
}

} // namespace mlopt
