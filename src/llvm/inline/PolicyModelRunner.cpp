#include "PolicyModelRunner.h"
#include "PluginDiagnostic.h"

#include "llvm/IR/LLVMContext.h"

using namespace llvm;

namespace mlopt {

PolicyModelRunner::PolicyModelRunner(LLVMContext &Ctx, std::shared_ptr<PolicyModel> ModelIn,
                                     bool Shadow, bool PerRunnerWarnings)
    : InlinePolicyRunner(Ctx, Kind::Development), Model(std::move(ModelIn)), Shadow(Shadow) {
  static bool WarnedInProcess = false;
  Warned = PerRunnerWarnings ? &WarnedHere : &WarnedInProcess;
  for (size_t I = 0; I < inlinerFeatures().size(); ++I)
    setUpBufferForTensor(I, inlinerFeatures()[I], Model->featureBuffer(I));
}

void PolicyModelRunner::warnOnce(const std::string &Text) {
  if (*Warned)
    return;
  *Warned = true;
  Ctx.diagnose(PluginDiagnostic(DS_Warning, Text));
}

void *PolicyModelRunner::evaluateUntyped() {
  try {
    Model->evaluate();
  } catch (const std::exception &E) {
    warnOnce(std::string("mlopt: ") + E.what() +
             "; using the default heuristic's decision where the model fails");
    Decision = DefaultDecision;
    return &Decision;
  } catch (...) {
    warnOnce("mlopt: model '" + Model->path() +
             "' failed; using the default heuristic's decision where the model fails");
    Decision = DefaultDecision;
    return &Decision;
  }
  // The inliner's rule: 0 or 1 is a decision, anything else is not.
  std::optional<int64_t> D = Model->decisionIndex();
  if (Shadow) {
    Decision = DefaultDecision;
  } else if (!D || (*D != 0 && *D != 1)) {
    warnOnce("mlopt: model '" + Model->path() + "' answered " + Model->rawDecision() +
             " for inlining_decision (expected 0 or 1); using the default "
             "heuristic's decision for such call sites");
    Decision = DefaultDecision;
  } else {
    Decision = *D;
  }
  return &Decision;
}

} // namespace mlopt
