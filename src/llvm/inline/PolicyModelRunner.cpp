#include "PolicyModelRunner.h"
#include "PluginDiagnostic.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"

using namespace llvm;

namespace mlopt {

PolicyModelRunner::PolicyModelRunner(LLVMContext &Ctx,
                                     const std::vector<llvm::TensorSpec> &Features,
                                     std::shared_ptr<PolicyModel> ModelIn, bool Shadow,
                                     bool PerRunnerWarnings)
    : InlinePolicyRunner(Ctx, Kind::Development, Features), Model(std::move(ModelIn)),
      Shadow(Shadow) {
  static std::atomic<bool> WarnedInProcess{false};
  Warned = PerRunnerWarnings ? &WarnedHere : &WarnedInProcess;
  const std::vector<mlopt::TensorSpec> &Taken = Model->features();
  std::vector<bool> Fed(Taken.size(), false);
  for (size_t I = 0; I < inputs().size(); ++I) {
    const mlopt::TensorSpec &In = inputs()[I];
    void *Buffer = nullptr; // LLVM's own buffer: an input the model does not take
    for (size_t J = 0; J < Taken.size(); ++J) {
      if (Taken[J].name() != In.name())
        continue;
      if (Taken[J].type() != In.type() || Taken[J].shape() != In.shape())
        throw PolicyError(Model->path() + ": the policy takes '" + In.name() + "' as " +
                          Taken[J].typeAndShape() + ", but LLVM provides " + In.typeAndShape());
      if (Model->featureBound(J))
        Buffer = Model->featureBuffer(J);
      Fed[J] = true;
    }
    setUpBufferForTensor(I, Features[I], Buffer);
  }
  for (size_t J = 0; J < Taken.size(); ++J) {
    if (Fed[J] || Taken[J].name() != CalleeLinkageInput)
      continue;
    if (Taken[J].type() != TensorType::Int64 || Taken[J].elementCount() != 1)
      throw PolicyError(Model->path() + ": the policy takes '" + Taken[J].name() + "' as " +
                        Taken[J].typeAndShape() +
                        ", but the callee's linkage class is int64_t [1]");
    if (Model->featureBound(J))
      LinkageInput = static_cast<int64_t *>(Model->featureBuffer(J));
    Fed[J] = true;
  }
  for (size_t J = 0; J < Taken.size(); ++J) {
    if (Fed[J] || Taken[J].name() != DefaultDecisionInput)
      continue;
    if (Taken[J].type() != TensorType::Int64 || Taken[J].elementCount() != 1)
      throw PolicyError(Model->path() + ": the policy takes '" + Taken[J].name() + "' as " +
                        Taken[J].typeAndShape() + ", but the heuristic's decision is int64_t [1]");
    if (Model->featureBound(J))
      DefaultInput = static_cast<int64_t *>(Model->featureBuffer(J));
    Fed[J] = true;
  }
  for (size_t J = 0; J < Taken.size(); ++J)
    if (!Fed[J] && Model->featureBound(J))
      throw PolicyError(Model->path() + ": the policy takes '" + Taken[J].name() + "' (" +
                        Taken[J].typeAndShape() + "), which LLVM " + LLVM_VERSION_STRING +
                        " does not provide here" +
                        (Taken[J].name().find("embedding") != std::string::npos
                             ? " (IR2Vec embeddings need LLVM 22 and a vocabulary: "
                               "-mlopt-inline-ir2vec-vocab=FILE, or ir2vec_vocab= in Python)"
                             : ""));
}

void PolicyModelRunner::warnOnce(const std::string &Text) {
  if (Warned->exchange(true))
    return;
  Ctx.diagnose(PluginDiagnostic(DS_Warning, Text));
}

void *PolicyModelRunner::evaluateUntyped() {
  if (DefaultInput)
    *DefaultInput = defaultDecision();
  if (LinkageInput)
    *LinkageInput = calleeLinkage();
  try {
    Model->evaluate();
  } catch (const std::exception &E) {
    warnOnce(std::string("mlopt: ") + E.what() +
             "; using the default heuristic's decision where the model fails");
    Decision = defaultDecision();
    return &Decision;
  } catch (...) {
    warnOnce("mlopt: model '" + Model->path() +
             "' failed; using the default heuristic's decision where the model fails");
    Decision = defaultDecision();
    return &Decision;
  }
  // The inliner's rule: 0 or 1 is a decision, anything else is not.
  std::optional<int64_t> D = Model->decisionIndex();
  if (Shadow) {
    Decision = defaultDecision();
  } else if (!D || (*D != 0 && *D != 1)) {
    warnOnce("mlopt: model '" + Model->path() + "' answered " + Model->rawDecision() +
             " for inlining_decision (expected 0 or 1); using the default "
             "heuristic's decision for such call sites");
    Decision = defaultDecision();
  } else {
    Decision = *D;
  }
  return &Decision;
}

} // namespace mlopt
