#include "SimplificationProbe.h"

#include "llvm/ADT/Any.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Analysis/LazyCallGraph.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/ModuleSlotTracker.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

using namespace llvm;

namespace mlopt {

static constexpr StringLiteral WalkAdaptor = "CGSCCToFunctionPassAdaptor";

static std::string attributesText(const AttributeList &AL) {
  std::string S = AL.getFnAttrs().getAsString() + " ret(" + AL.getRetAttrs().getAsString() + ")";
  for (unsigned I = 0; I + 2 < AL.getNumAttrSets(); ++I)
    S += " p" + std::to_string(I) + "(" + AL.getParamAttrs(I).getAsString() + ")";
  return S;
}

/// The globals F's instructions reference, directly or through constants.
static void collectGlobals(const Constant *C, SmallPtrSetImpl<const Constant *> &Visited,
                           std::vector<const GlobalValue *> &Out) {
  if (!Visited.insert(C).second)
    return;
  if (const auto *G = dyn_cast<GlobalValue>(C)) {
    Out.push_back(G);
    return;
  }
  for (const Value *Op : C->operands())
    if (const auto *OpC = dyn_cast<Constant>(Op))
      collectGlobals(OpC, Visited, Out);
}

/// The key of one simplification run on F (the header's approximation).
static SimplificationProbe::Key functionKey(const Function &F, SimplificationProbe::Key ModuleKey) {
  std::string Text;
  raw_string_ostream OS(Text);
  OS << ModuleKey.first << ' ' << ModuleKey.second << '\n';
  ModuleSlotTracker MST(F.getParent(), /*ShouldInitializeAllMetadata=*/false);
  std::string Body;
  {
    raw_string_ostream BOS(Body);
    static_cast<const Value &>(F).print(BOS, MST); // the whole definition, function-local slots
  }
  // Attribute groups (#N) are numbered module-wide: drop the numbers and
  // key the sets themselves, in the order they are referenced.
  for (size_t I = 0; I < Body.size(); ++I) {
    if (Body[I] == '#' && I + 1 < Body.size() && isdigit(static_cast<unsigned char>(Body[I + 1]))) {
      while (I + 1 < Body.size() && isdigit(static_cast<unsigned char>(Body[I + 1])))
        ++I;
      continue;
    }
    OS << Body[I];
  }
  OS << "\nattrs " << attributesText(F.getAttributes()) << " cc" << F.getCallingConv() << '\n';
  SmallPtrSet<const Constant *, 32> Visited;
  std::vector<const GlobalValue *> Globals;
  SmallVector<std::pair<unsigned, MDNode *>, 4> MDs;
  for (const BasicBlock &BB : F)
    for (const Instruction &I : BB) {
      if (const auto *Call = dyn_cast<CallBase>(&I))
        OS << "call " << attributesText(Call->getAttributes()) << '\n';
      I.getAllMetadata(MDs);
      for (const auto &[Kind, N] : MDs) {
        OS << "md " << Kind << ' ';
        N->print(OS, MST);
        OS << '\n';
      }
      for (const Value *Op : I.operands())
        if (const auto *C = dyn_cast<Constant>(Op))
          collectGlobals(C, Visited, Globals);
    }
  for (const GlobalValue *G : Globals) {
    if (const auto *Callee = dyn_cast<Function>(G)) {
      OS << "fn " << Callee->getName() << ' ' << *Callee->getFunctionType() << ' '
         << attributesText(Callee->getAttributes()) << " cc" << Callee->getCallingConv() << " l"
         << Callee->getLinkage() << " d" << Callee->isDeclaration() << '\n';
    } else if (const auto *V = dyn_cast<GlobalVariable>(G)) {
      V->print(OS, MST);
      OS << '\n';
    } else {
      OS << "gv " << G->getName() << " l" << G->getLinkage() << '\n';
    }
  }
  OS.flush();
  XXH128_hash_t H =
      xxh3_128bits(ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(Text.data()), Text.size()));
  return {H.high64, H.low64};
}

static bool hasDebugInfo(const Module &M) { return M.getNamedMetadata("llvm.dbg.cu") != nullptr; }

void SimplificationProbe::Session::registerCallbacks(PassInstrumentationCallbacks &PIC) {
  PIC.registerBeforeNonSkippedPassCallback([this](StringRef PassID, Any IR) {
    if (!InAdaptor) {
      if (PassID != WalkAdaptor)
        return;
      const LazyCallGraph::SCC *const *C = any_cast<const LazyCallGraph::SCC *>(&IR);
      if (!C)
        return;
      InAdaptor = true;
      SingletonSCC = (*C)->size() == 1;
      Depth = 0;
      return;
    }
    if (Depth++ != 0 || !PassID.starts_with("PassManager"))
      return;
    const Function *const *F = any_cast<const Function *>(&IR);
    if (!F)
      return;
    Clock::time_point KeyStart = Clock::now();
    Memoizable = SingletonSCC && !hasDebugInfo(*(*F)->getParent());
    Key K = functionKey(**F, ModuleKey);
    Hit = Memoizable && Probe.seen(K);
    Keys.push_back(K);
    Start = Clock::now();
    Own.KeySeconds += std::chrono::duration<double>(Start - KeyStart).count();
  });
  auto After = [this](StringRef PassID) {
    if (!InAdaptor)
      return;
    if (Depth == 0) { // the adaptor itself ends
      InAdaptor = false;
      return;
    }
    if (--Depth != 0 || !PassID.starts_with("PassManager"))
      return;
    double S = std::chrono::duration<double>(Clock::now() - Start).count();
    ++Own.Runs;
    Own.RunSeconds += S;
    if (!Memoizable)
      ++Own.Unmemoizable;
    if (Hit) {
      ++Own.Hits;
      Own.HitSeconds += S;
    }
  };
  PIC.registerAfterPassCallback(
      [After](StringRef PassID, Any, const PreservedAnalyses &) { After(PassID); });
  PIC.registerAfterPassInvalidatedCallback(
      [After](StringRef PassID, const PreservedAnalyses &) { After(PassID); });
}

void SimplificationProbe::Session::finish() {
  if (Finished)
    return;
  Finished = true;
  Own.Compiles = 1;
  Probe.add(Own, Keys);
}

bool SimplificationProbe::seen(const Key &K) const {
  std::lock_guard<std::mutex> G(Lock);
  return Seen.count(K) != 0;
}

void SimplificationProbe::add(const Tally &T, const std::vector<Key> &Keys) {
  std::lock_guard<std::mutex> G(Lock);
  Seen.insert(Keys.begin(), Keys.end());
  Total.Compiles += T.Compiles;
  Total.Runs += T.Runs;
  Total.Hits += T.Hits;
  Total.Unmemoizable += T.Unmemoizable;
  Total.RunSeconds += T.RunSeconds;
  Total.HitSeconds += T.HitSeconds;
  Total.KeySeconds += T.KeySeconds;
  Total.OptimizerSeconds += T.OptimizerSeconds;
  Total.CodegenSeconds += T.CodegenSeconds;
}

SimplificationProbe::Tally SimplificationProbe::tally() const {
  std::lock_guard<std::mutex> G(Lock);
  return Total;
}

} // namespace mlopt
