#include "InlineCostMemo.h"

#include "llvm/Analysis/InlineCost.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalAlias.h"
#include "llvm/IR/GlobalIFunc.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Operator.h"
#include "llvm/TargetParser/Triple.h"

#include <cstring>

using namespace llvm;

namespace mlopt {

AnalysisKey InlineCostMemoAnalysis::Key;

namespace {

/// Whether V turns a pointer into address bits (ptrtoint, LLVM 22's
/// ptrtoaddr): folding those bits reads a global's alignment, which
/// InstCombine may raise while working on another function.
bool isAddressBits(const Value *V) {
#if LLVM_VERSION_MAJOR >= 22
  if (isa<PtrToAddrOperator>(V))
    return true;
#endif
  return isa<PtrToIntOperator>(V);
}

/// Whether LLVM's analysis of the callee can never find V constant: V is
/// computed from memory (LLVM never simplifies a load) or is a stack slot,
/// through GEPs and casts (which fold only when every operand is constant).
bool neverConstant(const Value *V) {
  for (unsigned Depth = 0; Depth < 8; ++Depth) {
    if (isa<LoadInst>(V) || isa<AllocaInst>(V))
      return true;
    if (const auto *GEP = dyn_cast<GetElementPtrInst>(V))
      V = GEP->getPointerOperand();
    else if (const auto *Cast = dyn_cast<CastInst>(V))
      V = Cast->getOperand(0);
    else
      return false;
  }
  return false;
}

/// Whether constant C has address bits anywhere in it or, with Code, refers
/// to code (a function, alias, ifunc or block address: LLVM may then analyse
/// another function's body for this call); true past Depth 8.
bool holdsAddressBitsOrCode(const Constant *C, bool Code, unsigned Depth = 0) {
  if (isa<ConstantData>(C) || isa<GlobalVariable>(C))
    return false;
  if (isa<GlobalValue>(C) || isa<BlockAddress>(C) || isa<DSOLocalEquivalent>(C) ||
      isa<NoCFIValue>(C))
    return Code; // the code these name holds no address bits of its own
  if (isAddressBits(C) || Depth > 8)
    return true; // deep constant expressions: not worth the walk
  for (const Use &U : C->operands())
    if (holdsAddressBitsOrCode(cast<Constant>(U.get()), Code, Depth + 1))
      return true;
  return false;
}

/// Whether LLVM's analyses of a call to Callee read only Callee and the call
/// site's key.
bool memoizable(Function &Callee) {
  // The key was derived for X86's cost hooks and the target-independent ones
  // (no triple), which read nothing of the caller (other targets'
  // getInlineCallPenalty, getCallerAllocaCost and adjustInliningThreshold may).
  Triple Target(Callee.getParent()->getTargetTriple());
  if (Target.getArch() != Triple::UnknownArch && !Target.isX86())
    return false;
  for (BasicBlock &BB : Callee) {
    if (BB.hasAddressTaken())
      return false; // LLVM looks at its block addresses' users, anywhere in the module
    for (Instruction &I : BB) {
      // An indirect call may fold to a function whose body LLVM then
      // analyses; not through a pointer loaded from memory (a vtable slot).
      if (auto *Call = dyn_cast<CallBase>(&I))
        if (!Call->getCalledFunction() && !Call->isInlineAsm() &&
            !neverConstant(Call->getCalledOperand()))
          return false;
      // Address bits fold (reading a global's alignment) only from a constant.
      if (isAddressBits(&I) && !neverConstant(I.getOperand(0)))
        return false;
      for (const Use &Op : I.operands())
        if (auto *C = dyn_cast<Constant>(Op.get()); C && holdsAddressBitsOrCode(C, /*Code=*/false))
          return false;
    }
  }
  return true;
}

} // namespace

InlineCostMemoAnalysis::Result InlineCostMemoAnalysis::run(Function &Callee,
                                                           FunctionAnalysisManager &) {
  Result R;
  R.Memoizable = memoizable(Callee);
  return R;
}

namespace {

template <typename T> void put(SmallVectorImpl<char> &Key, T Value) {
  char Bytes[sizeof(T)];
  std::memcpy(Bytes, &Value, sizeof(T));
  Key.append(Bytes, Bytes + sizeof(T));
}

/// Appends Tag and constant C (uniqued: its address names it); false when C
/// holds code or address bits, which the call site's key cannot stand for.
bool putConstant(SmallVectorImpl<char> &Key, char Tag, const Constant *C) {
  if (holdsAddressBitsOrCode(C, /*Code=*/true))
    return false;
  put(Key, Tag);
  put(Key, static_cast<const void *>(C));
  return true;
}

/// Appends what LLVM reads of pointer argument V when it strips in-bounds
/// constant-offset GEPs and non-interposable aliases, and returns the base.
Value *putPointerChain(Value *V, SmallVectorImpl<char> &Key) {
  SmallPtrSet<Value *, 4> Visited;
  Visited.insert(V);
  do {
    if (auto *GEP = dyn_cast<GEPOperator>(V)) {
      put(Key, 'G');
      put(Key, GEP->getSourceElementType());
      put(Key, GEP->isInBounds());
      put(Key, GEP->getNumIndices());
      for (const Use &Index : GEP->indices())
        put(Key,
            static_cast<const void *>(dyn_cast<Constant>(Index.get()))); // nullptr: not a constant
      V = GEP->getPointerOperand();
    } else if (auto *GA = dyn_cast<GlobalAlias>(V)) {
      put(Key, 'A');
      put(Key, GA->isInterposable());
      if (GA->isInterposable())
        break;
      V = GA->getAliasee();
    } else {
      break;
    }
  } while (Visited.insert(V).second);
  return V;
}

bool callsItself(Function &F) {
  for (User *U : F.users())
    if (auto *Call = dyn_cast<CallBase>(U))
      if (Call->getFunction() == &F)
        return true;
  return false;
}

} // namespace

bool appendInlineCostKey(CallBase &CB, SmallVectorImpl<char> &Key) {
  Function *Callee = CB.getCalledFunction();
  Function *Caller = CB.getFunction();
  if (!Callee || Callee == Caller)
    return false;
  put(Key, CB.getOpcode());
  put(Key, CB.getAttributes().getRawPointer());
  put(Key, CB.getFunctionType());
  put(Key, Callee->getCallingConv());
  put(Key, Callee->getLinkage());
  put(Key, Caller->hasMinSize());
  put(Key, Caller->hasOptSize());
  StringRef StackSize = Caller->getFnAttribute("inline-max-stacksize").getValueAsString();
  put(Key, StackSize.size());
  Key.append(StackSize.begin(), StackSize.end());
  put(Key, callsItself(*Caller));
  put(Key,
      Callee->hasLocalLinkage() && Callee->hasOneLiveUse()); // the sole call to a local function
  const BasicBlock *Block = CB.getParent();
  if (auto *II = dyn_cast<InvokeInst>(&CB))
    Block = II->getNormalDest();
  put(Key, isa<UnreachableInst>(Block->getTerminator())); // LLVM then allows no size growth
  put(Key, CB.arg_size());
  SmallVector<Value *, 8> Bases;
  for (unsigned I = 0, E = CB.arg_size(); I != E; ++I) {
    Value *V = CB.getArgOperand(I);
    put(Key, V->getType());
    if (auto *C = dyn_cast<Constant>(V)) {
      if (!putConstant(Key, 'c', C))
        return false;
    } else {
#if LLVM_VERSION_MAJOR >= 20
      // LLVM 20+ maps each formal argument to the caller's value and folds an
      // extractvalue of it through the caller's insertvalue chain.
      if (V->getType()->isAggregateType())
        return false;
#endif
      put(Key, 'v');
    }
    Value *Base = nullptr;
    if (V->getType()->isPointerTy()) {
      Base = putPointerChain(V, Key);
      if (auto *C = dyn_cast<Constant>(Base)) {
        if (!putConstant(Key, 'C', C))
          return false;
      } else {
        // Which argument first had this base (LLVM compares bases), and whether it is an alloca.
        unsigned First = std::find(Bases.begin(), Bases.end(), Base) - Bases.begin();
        put(Key, 'B');
        put(Key, First);
        if (auto *AI = dyn_cast<AllocaInst>(Base)) {
          put(Key, AI->getAllocatedType());
          put(Key, static_cast<const void *>(AI->getArraySize()));
          put(Key, AI->getAlign().value());
          put(Key, AI->getAddressSpace());
        } else {
          put(Key, static_cast<const void *>(nullptr));
        }
      }
    }
    Bases.push_back(Base);
  }
  return true;
}

InlineCostMemo::InlineCostMemo(FunctionAnalysisManager &FAM, bool Enabled)
    : FAM(FAM), Enabled(Enabled && (LLVM_VERSION_MAJOR == 19 || LLVM_VERSION_MAJOR == 22)) {
  if (this->Enabled)
    FAM.registerPass([] { return InlineCostMemoAnalysis(); });
}

InlineCostResults *InlineCostMemo::entry(CallBase &CB) {
  Function *Callee = CB.getCalledFunction();
  if (!Enabled || !Callee) {
    ++Unmemoized;
    return nullptr;
  }
  auto &Memo = FAM.getResult<InlineCostMemoAnalysis>(*Callee);
  KeyBuffer.clear();
  if (!Memo.Memoizable || !appendInlineCostKey(CB, KeyBuffer)) {
    ++Unmemoized;
    return nullptr;
  }
  return &Memo.Entries.try_emplace(KeyBuffer.str()).first->second;
}

namespace {
/// E's result in Slot when Have says it is there (a hit), else Compute()'s,
/// kept in E (a miss); without E (not memoized), Compute()'s.
template <typename T, typename ComputeFn>
T lookupOrCompute(InlineCostResults *E, bool InlineCostResults::*Have, T InlineCostResults::*Slot,
                  uint64_t &Hits, uint64_t &Misses, ComputeFn Compute) {
  if (E && E->*Have) {
    ++Hits;
    return E->*Slot;
  }
  T Value = Compute();
  if (E) {
    ++Misses;
    E->*Have = true;
    E->*Slot = Value;
  }
  return Value;
}
} // namespace

std::optional<int> InlineCostMemo::estimate(InlineCostResults *E, CallBase &CB,
                                            TargetTransformInfo &TTI, GetAssumptionCacheFn GetAC) {
  return lookupOrCompute(E, &InlineCostResults::HaveEstimate, &InlineCostResults::Estimate, Hits,
                         Misses, [&] { return getInliningCostEstimate(CB, TTI, GetAC); });
}

std::optional<InlineCostFeatures> InlineCostMemo::features(InlineCostResults *E, CallBase &CB,
                                                           TargetTransformInfo &TTI,
                                                           GetAssumptionCacheFn GetAC) {
  return lookupOrCompute(E, &InlineCostResults::HaveFeatures, &InlineCostResults::Features, Hits,
                         Misses, [&] { return getInliningCostFeatures(CB, TTI, GetAC); });
}

void InlineCostMemo::forget(Function &F) {
  if (!Enabled)
    return;
  if (auto *Memo = FAM.getCachedResult<InlineCostMemoAnalysis>(F))
    Memo->Entries.clear();
}

} // namespace mlopt
