//===- InlineCostMemo.h - LLVM's inline cost analyses, memoized -*- C++ -*-===//
//
// Contract: InlineCostMemo answers llvm::getInliningCostEstimate and
// llvm::getInliningCostFeatures (as MLInlineAdvisor calls them: the callee's
// TTI and assumption cache, no BFI, TLI, PSI or remarks) with exactly the
// values those functions return, computing them only for call sites it has
// not seen in the same context. A result is reused for another call site to
// the same callee when the callee is unchanged and the call site's key is
// equal. The key holds everything the CallAnalyzer of LLVM 19.1 and 22.1
// reads outside the callee's body (X86's and the target-independent cost
// hooks read nothing of the caller): the call's kind and attribute list,
// the caller's minsize, optsize, "inline-max-stacksize" and whether it
// calls itself, whether this is the sole call to a local function, whether
// the call's block ends in unreachable, and per argument its type, the
// constant it is (if one), and for pointers the chain of GEPs and aliases
// LLVM strips (source types, inbounds, constant indices) to a base: a
// constant, or which earlier argument shares it, and whether it is an
// alloca (with its type).
// "Unchanged" is LLVM's analysis invalidation: the memo is a function
// analysis of the callee (FunctionAttrs invalidates the callers of a
// function whose attributes it changes), and forget() drops a function's
// memo when the advisor inlines into it, before the inliner invalidates.
// Not memoized: calls with a constant argument that holds code (a nested
// analysis of another function's body) or address bits (ptrtoint: folding
// them reads a global's alignment, which InstCombine may raise while working
// on another function); on LLVM 22, calls with a non-constant aggregate
// argument (LLVM 20+ maps formal arguments to the caller's values and folds
// extractvalue through the caller's insertvalue); callees with an indirect
// call (it may fold to a function whose body LLVM then analyses) or address
// bits, unless of a pointer loaded from memory or a stack slot (LLVM never
// finds those constant), or with address-taken blocks; modules for targets other
// than X86 (no triple counts as target-independent); LLVM majors other than
// 19 and 22 (not audited).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINECOSTMEMO_H
#define MLOPT_LLVM_INLINECOSTMEMO_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/IR/PassManager.h"

#include <cstdint>
#include <optional>

namespace llvm {
class AssumptionCache;
class CallBase;
class TargetTransformInfo;
} // namespace llvm

namespace mlopt {

/// The memoized results for one call-site key (each part computed once).
struct InlineCostResults {
  bool HaveEstimate = false;
  std::optional<int> Estimate;
  bool HaveFeatures = false;
  std::optional<llvm::InlineCostFeatures> Features;
};

/// The memo of one callee, kept by the function analysis manager (so it is
/// dropped whenever the callee's analyses are invalidated).
class InlineCostMemoAnalysis : public llvm::AnalysisInfoMixin<InlineCostMemoAnalysis> {
public:
  struct Result {
    bool Memoizable = true; ///< false: see memoizable() (InlineCostMemo.cpp)
    llvm::StringMap<InlineCostResults> Entries;
  };
  Result run(llvm::Function &Callee, llvm::FunctionAnalysisManager &FAM);

private:
  friend llvm::AnalysisInfoMixin<InlineCostMemoAnalysis>;
  static llvm::AnalysisKey Key;
};

/// Appends call site CB's key to Key; false when CB must not be memoized.
bool appendInlineCostKey(llvm::CallBase &CB, llvm::SmallVectorImpl<char> &Key);

class InlineCostMemo {
public:
  using GetAssumptionCacheFn = llvm::function_ref<llvm::AssumptionCache &(llvm::Function &)>;

  /// Registers the memo analysis with FAM. Enabled: memoize (LLVM 19 and 22).
  InlineCostMemo(llvm::FunctionAnalysisManager &FAM, bool Enabled);

  /// The entry for CB (nullptr: not memoized; compute every time).
  InlineCostResults *entry(llvm::CallBase &CB);
  std::optional<int> estimate(InlineCostResults *E, llvm::CallBase &CB,
                              llvm::TargetTransformInfo &TTI, GetAssumptionCacheFn GetAC);
  std::optional<llvm::InlineCostFeatures> features(InlineCostResults *E, llvm::CallBase &CB,
                                                   llvm::TargetTransformInfo &TTI,
                                                   GetAssumptionCacheFn GetAC);
  /// F's body changed (the advisor inlined into it): its memo is stale.
  void forget(llvm::Function &F);

  uint64_t hits() const { return Hits; }
  uint64_t misses() const { return Misses; }
  uint64_t unmemoized() const { return Unmemoized; }

private:
  llvm::FunctionAnalysisManager &FAM;
  bool Enabled;
  llvm::SmallString<256> KeyBuffer;
  uint64_t Hits = 0, Misses = 0, Unmemoized = 0;
};

} // namespace mlopt

#endif
