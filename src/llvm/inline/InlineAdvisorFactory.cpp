#include "InlineAdvisorFactory.h"
#include "HeuristicInlineDecision.h"
#include "MLoptInlineAdvisor.h"

#include "llvm/IR/Module.h"

using namespace llvm;

namespace mlopt {

InlineAdvisor *makeInlineAdvisor(Module &M, FunctionAnalysisManager &FAM,
                                 ModuleAnalysisManager &MAM, const InlineParams &Params,
                                 std::unique_ptr<InlinePolicyRunner> Runner,
                                 const TrainingLogProvider &LogFor) {
  if (!Runner)
    Runner = std::make_unique<HeuristicRunner>(M.getContext());
  TrainingLogWriter *Log = LogFor ? LogFor(M.getContext(), *Runner) : nullptr;
  auto Default = [&FAM, Params](CallBase &CB) { return heuristicInlineDecision(CB, FAM, Params); };
  return new MLoptInlineAdvisor(M, MAM, std::move(Runner), Default, Log);
}

} // namespace mlopt
