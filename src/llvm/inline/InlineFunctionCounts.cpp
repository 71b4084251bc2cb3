#include "InlineFunctionCounts.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/IR/CFG.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"

using namespace llvm;

namespace mlopt {

namespace {
/// LLVM 19's getNrBlocksFromCond.
int64_t blocksFromCondition(const BasicBlock &BB) {
  if (const auto *BI = dyn_cast<BranchInst>(BB.getTerminator())) {
    if (BI->isConditional())
      return BI->getNumSuccessors();
  } else if (const auto *SI = dyn_cast<SwitchInst>(BB.getTerminator())) {
    return SI->getNumCases() + (nullptr != SI->getDefaultDest());
  }
  return 0;
}

/// LLVM 19's getUses.
int64_t usesOf(const Function &F) { return (!F.hasLocalLinkage() ? 1 : 0) + F.getNumUses(); }
} // namespace

FunctionCounts FunctionCounts::of(const Function &F) {
  FunctionCounts C;
  for (const BasicBlock *BB : reachableBlocks(F))
    C.updateForBB(*BB, +1);
  C.Uses = usesOf(F);
  return C;
}

AnalysisKey FunctionCountsAnalysis::Key;

void FunctionCounts::updateForBB(const BasicBlock &BB, int64_t Direction) {
  BasicBlockCount += Direction;
  BlocksReachedFromConditionalInstruction += Direction * blocksFromCondition(BB);
  // One pass for BB.sizeWithoutDebug() (which skips debug and pseudo-probe
  // intrinsics) and the direct calls (intrinsics are not counted either).
  int64_t Size = 0;
  for (const Instruction &I : BB) {
    if (isa<DbgInfoIntrinsic>(I) || isa<PseudoProbeInst>(I))
      continue;
    ++Size;
    if (const auto *CS = dyn_cast<CallBase>(&I)) {
      const Function *Callee = CS->getCalledFunction();
      if (Callee && !Callee->isIntrinsic() && !Callee->isDeclaration())
        DirectCallsToDefinedFunctions += Direction;
    }
  }
  TotalInstructionCount += Direction * Size;
}

DenseSet<const BasicBlock *> reachableBlocks(const Function &F) {
  DenseSet<const BasicBlock *> Seen;
  if (F.empty())
    return Seen;
  SmallVector<const BasicBlock *, 32> Work{&F.getEntryBlock()};
  Seen.insert(&F.getEntryBlock());
  while (!Work.empty()) {
    const BasicBlock *BB = Work.pop_back_val();
    for (const BasicBlock *Succ : successors(BB))
      if (Seen.insert(Succ).second)
        Work.push_back(Succ);
  }
  return Seen;
}

CountsUpdater::CountsUpdater(FunctionCounts &Counts, CallBase &CB)
    : Counts(Counts), CallSiteBB(*CB.getParent()), Caller(*CallSiteBB.getParent()) {
  // The blocks LLVM's FunctionPropertiesUpdater discounts: the call site's,
  // the entry, the call site's successors and, for an invoke, its landing
  // pad's successors; the call site's block itself is not a successor.
  SmallPtrSet<const BasicBlock *, 8> Succs;
  Succs.insert(succ_begin(&CallSiteBB), succ_end(&CallSiteBB));
  if (const auto *II = dyn_cast<InvokeInst>(&CB)) {
    const BasicBlock *UnwindDest = II->getUnwindDest();
    Succs.insert(succ_begin(UnwindDest), succ_end(UnwindDest));
  }
  Succs.erase(&CallSiteBB);
  Successors.assign(Succs.begin(), Succs.end());
  SmallPtrSet<const BasicBlock *, 8> Discounted(Succs.begin(), Succs.end());
  Discounted.insert(&CallSiteBB);
  Discounted.insert(&*Caller.begin());
  for (const BasicBlock *BB : Discounted)
    Counts.updateForBB(*BB, -1);
}

void CountsUpdater::finish(DenseSet<const BasicBlock *> *Reachable) const {
  const BasicBlock *Entry = &*Caller.begin();
  SmallPtrSet<const BasicBlock *, 8> SuccSet(Successors.begin(), Successors.end());

  // LLVM re-includes the entry, the successors still reachable, and what a
  // walk from the call site reaches before those. Assume first that all
  // successors are still reachable: true when the walk reaches each of them.
  {
    SetVector<const BasicBlock *> Reinclude;
    if (&CallSiteBB != Entry)
      Reinclude.insert(Entry);
    for (const BasicBlock *S : Successors)
      Reinclude.insert(S);
    const size_t Mark = Reinclude.size();
    Reinclude.insert(&CallSiteBB);
    SmallPtrSet<const BasicBlock *, 8> Hit;
    for (size_t I = Mark; I < Reinclude.size(); ++I)
      for (const BasicBlock *Succ : successors(Reinclude[I]))
        if (!Reinclude.insert(Succ) && SuccSet.contains(Succ))
          Hit.insert(Succ);
    if (Hit.size() == SuccSet.size()) {
      for (const BasicBlock *BB : Reinclude)
        Counts.updateForBB(*BB, +1);
      Counts.Uses = usesOf(Caller);
      if (Reachable) {
        // Nothing reachable became unreachable; what is new hangs off the
        // walked blocks (or a split landing pad).
        SmallVector<const BasicBlock *, 32> Work(Reinclude.begin(), Reinclude.end());
        for (const BasicBlock *BB : Work)
          Reachable->insert(BB);
        while (!Work.empty()) {
          const BasicBlock *BB = Work.pop_back_val();
          for (const BasicBlock *Succ : successors(BB))
            if (Reachable->insert(Succ).second)
              Work.push_back(Succ);
        }
      }
      return;
    }
  }

  // Some successor was not reached from the call site: LLVM's walk with
  // reachability from the entry, decided by one walk over the caller.
  DenseSet<const BasicBlock *> Live = reachableBlocks(Caller);
  SetVector<const BasicBlock *> Reinclude;
  SetVector<const BasicBlock *> Unreachable;
  if (&CallSiteBB != Entry)
    Reinclude.insert(Entry);
  for (const BasicBlock *S : Successors)
    if (Live.contains(S))
      Reinclude.insert(S);
    else
      Unreachable.insert(S);
  const size_t IncludeSuccessorsMark = Reinclude.size();
  Reinclude.insert(&CallSiteBB);
  for (size_t I = 0; I < Reinclude.size(); ++I) {
    const BasicBlock *BB = Reinclude[I];
    Counts.updateForBB(*BB, +1);
    if (I >= IncludeSuccessorsMark)
      Reinclude.insert(succ_begin(BB), succ_end(BB));
  }
  const size_t AlreadyExcludedMark = Unreachable.size();
  for (size_t I = 0; I < Unreachable.size(); ++I) {
    const BasicBlock *U = Unreachable[I];
    if (I >= AlreadyExcludedMark)
      Counts.updateForBB(*U, -1);
    for (const BasicBlock *Succ : successors(U))
      if (!Live.contains(Succ))
        Unreachable.insert(Succ);
  }
  Counts.Uses = usesOf(Caller);
  if (Reachable)
    *Reachable = std::move(Live);
}

} // namespace mlopt
