//===- FeatureUpkeepAdvisor.h - LLVM's ML inline advisor, mlopt's upkeep -*- C++ -*-===//
//
// Contract: FeatureUpkeepAdvisor / FeatureUpkeepAdvice are LLVM's (19, 22)
// MLInlineAdvisor / MLInlineAdvice (the same 38 feature values for every
// call site, the same module state: node and edge counts, call-site
// heights, IR size and its growth guard, the same advice, remarks and
// analysis invalidation of the function properties), except how a caller's
// properties are kept after an inlining: LLVM recomputes the caller's
// dominator tree and loop info each time (FunctionPropertiesUpdater);
// here InlineFunctionCounts' CountsUpdater decides reachability by walks,
// keeps no loop counts (no feature reads them) and leaves the caller's
// cached dominator tree and loop info alone (the inliner invalidates all
// of the caller's analyses once it is done with it, as with the default
// advisor). Whether a call site is reachable is asked of the cached
// dominator tree, as LLVM does, until the advisor has inlined into that
// caller during the current inliner run; from then on of the reachable
// blocks that CountsUpdater keeps (what a recomputed tree would answer).
// LLVM's two inline cost analyses per call site go through InlineCostMemo
// (MLOPT_INLINE_COST_MEMO=0 turns it off, and with
// MLOPT_INLINE_COST_MEMO=stats its counts are printed to stderr at the end).
// makeInlineAdvisor() decides when it may be used (featureUpkeepUsable()).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_FEATUREUPKEEPADVISOR_H
#define MLOPT_LLVM_FEATUREUPKEEPADVISOR_H

#include "InlineCostMemo.h"
#include "InlineFunctionCounts.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/LazyCallGraph.h"
#include "llvm/Analysis/MLModelRunner.h"
#include "llvm/Analysis/ProfileSummaryInfo.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/DiagnosticInfo.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace mlopt {

/// Why mlopt's upkeep cannot stand in for LLVM's here (LLVM major, or one of
/// LLVM's own MLInlineAdvisor options it does not implement was given), or
/// "" when it can.
std::string featureUpkeepUnusableReason();

/// The LLVM majors whose MLInlineAdvisor mlopt's upkeep reproduces.
#define MLOPT_HAVE_FEATURE_UPKEEP (LLVM_VERSION_MAJOR == 19 || LLVM_VERSION_MAJOR == 22)

#if MLOPT_HAVE_FEATURE_UPKEEP

class FeatureUpkeepAdvice;

class FeatureUpkeepAdvisor : public llvm::InlineAdvisor {
public:
  FeatureUpkeepAdvisor(llvm::Module &M, llvm::ModuleAnalysisManager &MAM,
                       std::unique_ptr<llvm::MLModelRunner> ModelRunner,
                       std::function<bool(llvm::CallBase &)> GetDefaultAdvice);
  ~FeatureUpkeepAdvisor() override;

  void onPassEntry(llvm::LazyCallGraph::SCC *SCC) override;
  void onPassExit(llvm::LazyCallGraph::SCC *SCC) override;

  int64_t getIRSize(llvm::Function &F) const { return getCachedFPI(F).TotalInstructionCount; }
  void onSuccessfulInlining(const FeatureUpkeepAdvice &Advice, bool CalleeWasDeleted);

  bool isForcedToStop() const { return ForceStop; }
  int64_t getLocalCalls(llvm::Function &F);
  const llvm::MLModelRunner &getModelRunner() const { return *ModelRunner; }
  FunctionCounts &getCachedFPI(llvm::Function &F) const;
  /// The blocks of F known reachable, when the advisor inlined into F in
  /// this inliner run (nullptr otherwise).
  llvm::DenseSet<const llvm::BasicBlock *> *inlinedIntoReachable(llvm::Function &F);
  /// Records that the advisor inlined into F; its reachable blocks to bring
  /// up to date, if already computed (nullptr: computed when first asked).
  llvm::DenseSet<const llvm::BasicBlock *> *markInlinedInto(llvm::Function &F);

protected:
  std::unique_ptr<llvm::InlineAdvice> getAdviceImpl(llvm::CallBase &CB) override;
  std::unique_ptr<llvm::InlineAdvice> getMandatoryAdvice(llvm::CallBase &CB, bool Advice) override;
  virtual std::unique_ptr<FeatureUpkeepAdvice> getMandatoryAdviceImpl(llvm::CallBase &CB);
  virtual std::unique_ptr<FeatureUpkeepAdvice>
  getAdviceFromModel(llvm::CallBase &CB, llvm::OptimizationRemarkEmitter &ORE);
  unsigned getInitialFunctionLevel(const llvm::Function &F) const;

  std::unique_ptr<llvm::MLModelRunner> ModelRunner;
  std::function<bool(llvm::CallBase &)> GetDefaultAdvice;

private:
  int64_t getModuleIRSize() const;
  std::unique_ptr<llvm::InlineAdvice> getSkipAdviceIfUnreachableCallsite(llvm::CallBase &CB);
  void print(llvm::raw_ostream &OS) const override;

  mutable std::map<const llvm::Function *, FunctionCounts> FPICache;
  /// Callers inlined into during this inliner run, with their reachable
  /// blocks once computed.
  llvm::DenseMap<const llvm::Function *, std::optional<llvm::DenseSet<const llvm::BasicBlock *>>>
      InlinedInto;

  llvm::LazyCallGraph &CG;
  int64_t NodeCount = 0;
  int64_t EdgeCount = 0;
  int64_t EdgesOfLastSeenNodes = 0;
  std::map<const llvm::LazyCallGraph::Node *, unsigned> FunctionLevels;
  const int32_t InitialIRSize = 0;
  int32_t CurrentIRSize = 0;
  llvm::SmallPtrSet<const llvm::LazyCallGraph::Node *, 1> NodesInLastSCC;
  llvm::DenseSet<const llvm::LazyCallGraph::Node *> AllNodes;
  llvm::DenseSet<llvm::Function *> DeadFunctions;
  bool ForceStop = false;
  llvm::ProfileSummaryInfo &PSI;
  float SizeIncreaseThreshold = 2.0f;
  InlineCostMemo CostMemo;
};

class FeatureUpkeepAdvice : public llvm::InlineAdvice {
public:
  FeatureUpkeepAdvice(FeatureUpkeepAdvisor *Advisor, llvm::CallBase &CB,
                      llvm::OptimizationRemarkEmitter &ORE, bool Recommendation);

  void recordInliningImpl() override;
  void recordInliningWithCalleeDeletedImpl() override;
  void recordUnsuccessfulInliningImpl(const llvm::InlineResult &Result) override;
  void recordUnattemptedInliningImpl() override;

  llvm::Function *getCaller() const { return Caller; }
  llvm::Function *getCallee() const { return Callee; }

  const int64_t CallerIRSize;
  const int64_t CalleeIRSize;
  const int64_t CallerAndCalleeEdges;
  void updateCachedCallerFPI(FeatureUpkeepAdvisor &Advisor) const;

private:
  void reportContextForRemark(llvm::DiagnosticInfoOptimizationBase &OR);
  FeatureUpkeepAdvisor *getAdvisor() const { return static_cast<FeatureUpkeepAdvisor *>(Advisor); }
  const FunctionCounts PreInlineCallerFPI;
  std::optional<CountsUpdater> FPU;
};

#endif

} // namespace mlopt

#endif
