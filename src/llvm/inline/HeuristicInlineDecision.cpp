#include "HeuristicInlineDecision.h"
#include "LLVMOption.h"
#include "LLVMVersion.h"

#include "llvm/Analysis/AssumptionCache.h"
#include "llvm/Analysis/BlockFrequencyInfo.h"
#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ProfileSummaryInfo.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

namespace mlopt {

/// The value of LLVM's own -inline-deferral option (default false).
static bool inlineDeferralOption() {
  static const bool Value = [] {
    cl::opt<bool> *Opt = findLLVMOption<bool>("inline-deferral");
    return Opt && bool(*Opt);
  }();
  return Value;
}

bool heuristicInlineDecision(CallBase &CB, FunctionAnalysisManager &FAM,
                             const InlineParams &Params) {
  Function &Caller = *CB.getCaller();
  Module &M = *Caller.getParent();
  ProfileSummaryInfo *PSI = FAM.getResult<ModuleAnalysisManagerFunctionProxy>(Caller)
                                .getCachedResult<ProfileSummaryAnalysis>(M);
  auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(Caller);
  auto GetAC = [&](Function &F) -> AssumptionCache & {
    return FAM.getResult<AssumptionAnalysis>(F);
  };
  auto GetBFI = [&](Function &F) -> BlockFrequencyInfo & {
    return FAM.getResult<BlockFrequencyAnalysis>(F);
  };
  auto GetTLI = [&](Function &F) -> const TargetLibraryInfo & {
    return FAM.getResult<TargetLibraryAnalysis>(F);
  };
  auto Cost = [&](CallBase &Call) {
    Function &Callee = *Call.getCalledFunction();
    return getInlineCost(Call, Params, FAM.getResult<TargetIRAnalysis>(Callee), GetAC, GetTLI,
                         GetBFI, PSI, /*ORE=*/nullptr);
  };
  // shouldInline only reports to ORE when remarks are enabled; the decision
  // itself is what the default advisor acts on.
  bool Deferral = Params.EnableDeferral.value_or(inlineDeferralOption());
#if LLVM_VERSION_MAJOR >= 20
  TargetTransformInfo &CalleeTTI = FAM.getResult<TargetIRAnalysis>(*CB.getCalledFunction());
  return shouldInline(CB, CalleeTTI, Cost, ORE, Deferral).has_value();
#else
  return shouldInline(CB, Cost, ORE, Deferral).has_value();
#endif
}

} // namespace mlopt
