#include "InlineAdvisorFactory.h"
#include "HeuristicInlineDecision.h"
#include "MLoptInlineAdvisor.h"
#include "PluginDiagnostic.h"

#include "llvm/IR/Module.h"

using namespace llvm;

namespace mlopt {

InlineAdvisor *makeInlineAdvisor(Module &M, FunctionAnalysisManager &FAM,
                                 ModuleAnalysisManager &MAM, const InlineParams &Params,
                                 InlineContext IC, std::unique_ptr<InlinePolicyRunner> Runner,
                                 const TrainingLogProvider &LogFor, DecisionTrace *Sites) {
  try { // called by LLVM: nothing may unwind through its frames
    if (!Runner)
      Runner = std::make_unique<HeuristicRunner>(M.getContext());
    TrainingLogWriter *Log = LogFor ? LogFor(M.getContext(), *Runner) : nullptr;
    auto Default = [&FAM, Params](CallBase &CB) {
      return heuristicInlineDecision(CB, FAM, Params);
    };
    return new MLoptInlineAdvisor(M, MAM, std::move(Runner), Default, Log, Sites);
  } catch (const std::exception &E) {
    M.getContext().diagnose(PluginDiagnostic(
        DS_Error, std::string("mlopt: cannot set up the inline advisor: ") + E.what()));
    return new DefaultInlineAdvisor(M, FAM, Params, IC);
  }
}

} // namespace mlopt
