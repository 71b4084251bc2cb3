//===- InlinePolicyRunner.h - mlopt's inliner model runners -----*- C++ -*-===//
//
// Contract: an llvm::MLModelRunner over the inputs LLVM's ML inline advisor
// hands its runner, in tensor order: the 38 int64 inliner features and, on
// LLVM 22 with an IR2Vec vocabulary, the float callee_embedding and
// caller_embedding [D] (inputs() lists them as mlopt TensorSpecs).
// evaluate<int64_t>() is the inlining decision. Before each evaluation the
// advisor calls setDefaultDecision() with the stock heuristic's answer for
// the same call site, so a runner can fall back to it (a dead host, a
// stalled model). Input buffers are never modified by evaluation.
// extraOutputs() lists model outputs beyond the decision that the training
// log records after the inputs; their bytes are valid after evaluate().
// An InlineRunnerFactory makes the runner for an advisor from LLVM's input
// list; it may throw (the advisor reports it and uses the HeuristicRunner).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEPOLICYRUNNER_H
#define MLOPT_LLVM_INLINEPOLICYRUNNER_H

#include "TensorSpec.h"

#include "LLVMVersion.h"
#include "TensorSpecConversion.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/MLModelRunner.h"
#include "llvm/Analysis/TensorSpec.h"

#include <functional>
#include <memory>
#include <vector>

namespace mlopt {

/// The input through which a policy may see the heuristic's decision (the
/// name LLVM logs it under).
inline constexpr const char *DefaultDecisionInput = "inlining_default";

class InlinePolicyRunner : public llvm::MLModelRunner {
public:
  const std::vector<mlopt::TensorSpec> &inputs() const { return Inputs; }
  void setDefaultDecision(bool Inline) { DefaultDecision = Inline ? 1 : 0; }
  virtual const std::vector<mlopt::TensorSpec> &extraOutputs() const {
    static const std::vector<mlopt::TensorSpec> None;
    return None;
  }
  virtual const void *extraOutputData(size_t) const { return nullptr; }

protected:
  InlinePolicyRunner(llvm::LLVMContext &Ctx, Kind K,
                     const std::vector<llvm::TensorSpec> &LLVMInputs)
      : MLModelRunner(Ctx, K, LLVMInputs.size()) {
    for (const llvm::TensorSpec &S : LLVMInputs)
      Inputs.push_back(fromLLVM(S));
  }
  std::vector<mlopt::TensorSpec> Inputs;
  int64_t DefaultDecision = 0;
};

using InlineRunnerFactory = std::function<std::unique_ptr<InlinePolicyRunner>(
    llvm::LLVMContext &, const std::vector<llvm::TensorSpec> &Inputs)>;

/// No model: the decision is the stock heuristic's (also the fallback when
/// another runner cannot be made).
class HeuristicRunner final : public InlinePolicyRunner {
public:
  HeuristicRunner(llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features)
      : InlinePolicyRunner(Ctx, Kind::NoOp, Features) {
    for (size_t I = 0; I < Features.size(); ++I)
      setUpBufferForTensor(I, Features[I], nullptr);
  }

private:
  void *evaluateUntyped() override {
    Decision = DefaultDecision;
    return &Decision;
  }
  int64_t Decision = 0;
};

} // namespace mlopt

#endif
