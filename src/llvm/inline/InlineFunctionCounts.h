//===- InlineFunctionCounts.h - A function's inliner counts across inlining -*- C++ -*-===//
//
// Contract: FunctionCounts holds the part of LLVM's FunctionPropertiesInfo
// that the inliner's 38 features and MLInlineAdvisor's module state read
// (blocks, blocks reached from a conditional, uses, direct calls to defined
// functions, instructions), with LLVM 19's definitions (updateForBB is
// FunctionPropertiesInfo::updateForBB for these fields).
// CountsUpdater is LLVM 19's FunctionPropertiesUpdater for these counts:
// built before InlineFunction (it subtracts the blocks that inlining may
// change), finish() after a successful inlining (it re-adds what is
// reachable and drops what became unreachable), with the same walk. LLVM
// asks a freshly recomputed dominator tree which blocks are reachable from
// the entry; finish() decides it without one: when the walk from the call
// site reaches every block that followed it, nothing became unreachable
// (the rest of the caller is untouched by inlining) and the walk is the
// whole answer; otherwise one walk from the entry decides, exactly.
// Loop counts (TopLevelLoopCount, MaxLoopDepth), which no feature reads,
// are not kept, so no LoopInfo is computed either.
// finish() also keeps a caller's set of reachable blocks up to date (the
// advisor's answer to "is this call site reachable?" after inlining).
// FunctionCountsAnalysis gives, through the function analysis manager, the
// counts FunctionPropertiesAnalysis gives, from one walk over the blocks
// reachable from the entry (no dominator tree, no loop info). LLVM preserves
// or abandons FunctionPropertiesAnalysis by name nowhere but in its ML
// advisor, so a cached result of either lives exactly as long.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEFUNCTIONCOUNTS_H
#define MLOPT_LLVM_INLINEFUNCTIONCOUNTS_H

#include "llvm/ADT/DenseSet.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/PassManager.h"

#include <cstdint>

namespace mlopt {

struct FunctionCounts {
  int64_t BasicBlockCount = 0;
  int64_t BlocksReachedFromConditionalInstruction = 0;
  int64_t Uses = 0;
  int64_t DirectCallsToDefinedFunctions = 0;
  int64_t TotalInstructionCount = 0;

  /// What FunctionPropertiesInfo::getFunctionPropertiesInfo counts for F.
  static FunctionCounts of(const llvm::Function &F);
  void updateForBB(const llvm::BasicBlock &BB, int64_t Direction);
};

/// The blocks of F reachable from its entry (a walk over the current CFG).
llvm::DenseSet<const llvm::BasicBlock *> reachableBlocks(const llvm::Function &F);

class FunctionCountsAnalysis : public llvm::AnalysisInfoMixin<FunctionCountsAnalysis> {
  friend llvm::AnalysisInfoMixin<FunctionCountsAnalysis>;
  static llvm::AnalysisKey Key;

public:
  using Result = FunctionCounts;
  Result run(llvm::Function &F, llvm::FunctionAnalysisManager &) { return FunctionCounts::of(F); }
};

class CountsUpdater {
public:
  CountsUpdater(FunctionCounts &Counts, llvm::CallBase &CB);

  /// After a successful inlining. Reachable, when given, holds the blocks
  /// of the caller that were reachable before; it is brought up to date.
  void finish(llvm::DenseSet<const llvm::BasicBlock *> *Reachable) const;

  llvm::Function &caller() const { return Caller; }

private:
  FunctionCounts &Counts;
  llvm::BasicBlock &CallSiteBB;
  llvm::Function &Caller;
  llvm::SmallVector<const llvm::BasicBlock *, 4> Successors; // insertion order
};

} // namespace mlopt

#endif
