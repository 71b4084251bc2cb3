//===- InlinePolicyRunner.h - mlopt's inliner model runners -----*- C++ -*-===//
//
// Contract: an llvm::MLModelRunner over the inputs LLVM's ML inline advisor
// hands its runner, in tensor order: the 38 int64 inliner features and, on
// LLVM 22 with an IR2Vec vocabulary, the float callee_embedding and
// caller_embedding [D] (inputs() lists them as mlopt TensorSpecs).
// evaluate<int64_t>() is the inlining decision. Before each evaluation the
// advisor tells the runner how to get the stock heuristic's answer for the
// same call site (askDefaultWith); a runner that needs it (a fallback for a
// dead host or a failing model, a policy that takes it as an input, a
// training log) calls defaultDecision(), which runs the heuristic's cost
// analysis at most once per call site. A shipped policy that never asks
// does not pay for it. The advisor also tells the runner the call site's
// callee (tellCallee), for a policy that takes callee_linkage. Input
// buffers are never modified by evaluation.
// extraOutputs() lists model outputs beyond the decision that the training
// log records after the inputs; their bytes are valid after evaluate().
// An InlineRunnerFactory makes the runner for an advisor from LLVM's input
// list; it may throw (the advisor reports it and uses the HeuristicRunner).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEPOLICYRUNNER_H
#define MLOPT_LLVM_INLINEPOLICYRUNNER_H

#include "TensorSpec.h"

#include "CalleeLinkage.h"

#include "LLVMVersion.h"
#include "TensorSpecConversion.h"
#include "llvm/ADT/STLFunctionalExtras.h"
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
  /// How to get the heuristic's decision for the call site about to be
  /// evaluated; Compute must stay valid until the next call (the advisor
  /// passes a null one when it is done with the call site).
  void askDefaultWith(llvm::function_ref<bool()> Compute) {
    ComputeDefault = Compute;
    DefaultKnown = false;
  }
  /// The heuristic's decision (0 or 1), computed when first asked; 0 when
  /// no call site is being evaluated.
  int64_t defaultDecision() {
    if (!DefaultKnown) {
      DefaultDecision = ComputeDefault && ComputeDefault() ? 1 : 0;
      DefaultKnown = true;
    }
    return DefaultDecision;
  }
  /// The callee of the call site about to be evaluated (null: indirect);
  /// a policy input named callee_linkage sees calleeLinkageClass of it.
  void tellCallee(const llvm::Function *Callee) { CalleeLinkage = calleeLinkageClass(Callee); }
  int64_t calleeLinkage() const { return CalleeLinkage; }
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
  int64_t DefaultDecision = 0; // valid after defaultDecision()
  int64_t CalleeLinkage = 4;   // of the call site being evaluated (tellCallee)

private:
  llvm::function_ref<bool()> ComputeDefault;
  bool DefaultKnown = true;
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
    Decision = defaultDecision();
    return &Decision;
  }
  int64_t Decision = 0;
};

} // namespace mlopt

#endif
