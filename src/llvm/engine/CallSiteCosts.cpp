#include "CallSiteCosts.h"
#include "ToolSetup.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/InlineCost.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"

using namespace llvm;

namespace mlopt {

std::vector<CallSiteCost> callSiteCosts(const std::string &Bitcode, const std::string &Name) {
  initializeTargets();
  std::shared_lock<std::shared_mutex> OptionsStable(llvmOptionLock());
  LLVMContext Ctx;
  collectDiagnostics(Ctx);
  // Verified when it was loaded (loadModule).
  std::unique_ptr<Module> M = parseModule(Ctx, Bitcode, Name, /*Verify=*/false);
  std::unique_ptr<TargetMachine> TM = createOptTargetMachine(*M);
  PassSetup Passes(*M, TM.get());
  FunctionAnalysisManager &FAM = Passes.FAM();
  auto GetAssumptionCache = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  std::vector<CallSiteCost> Sites;
  for (Function &Caller : *M) {
    if (Caller.isDeclaration())
      continue;
    for (Instruction &I : instructions(Caller)) {
      auto *CB = dyn_cast<CallBase>(&I);
      Function *Callee = CB ? CB->getCalledFunction() : nullptr;
      if (!Callee || Callee->isDeclaration())
        continue;
      CallSiteCost Site;
      Site.Caller = Caller.getName().str();
      Site.Callee = Callee->getName().str();
      std::optional<int> Cost = getInliningCostEstimate(
          *CB, FAM.getResult<TargetIRAnalysis>(*Callee), GetAssumptionCache);
      Site.Inlinable = Cost.has_value();
      Site.Cost = Cost.value_or(0);
      Sites.push_back(std::move(Site));
    }
  }
  return Sites;
}

} // namespace mlopt
