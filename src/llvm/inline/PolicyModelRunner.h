//===- PolicyModelRunner.h - A trained policy as the inliner's model -*- C++ -*-===//
//
// Contract: an InlinePolicyRunner whose decisions come from a PolicyModel
// (.tflite file, ModelUnderTraining directory or compiled .so). LLVM's
// inputs are matched to the model's bound features by name: a matched
// input's buffer IS the model's input buffer (no copy); an input the model
// does not take (IR2Vec embeddings for a policy trained without them) gets a
// buffer of its own. A model input named inlining_default (int64 [1]) that
// LLVM does not provide is fed the stock heuristic's decision for the call
// site (a policy that learns where to differ from the heuristic); one
// named callee_linkage (int64 [1]) is fed calleeLinkageClass of the call
// site's callee (CalleeLinkage.h). The
// constructor throws PolicyError, naming the tensor, when a matched input
// differs in type or shape, or when the model takes a feature LLVM does not
// provide (a policy trained with IR2Vec embeddings, run without a
// vocabulary). The model's extra outputs are reported for the
// training log. The inliner's decision rule lives here, not in the
// problem-neutral PolicyModel: an answer other than 0 or 1, or a failing
// evaluation, makes the runner warn once and use the stock heuristic's
// decision for that call site. "Once" is per process
// (a compiler) or, with PerRunnerWarnings, per runner (one in-process compile).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_POLICYMODELRUNNER_H
#define MLOPT_LLVM_POLICYMODELRUNNER_H

#include <atomic>

#include "InlinePolicyRunner.h"
#include "PolicyModel.h"

#include <memory>

namespace mlopt {

class PolicyModelRunner final : public InlinePolicyRunner {
public:
  /// Shadow: evaluate the model but answer the heuristic's decision (for
  /// measuring the model's cost alone).
  PolicyModelRunner(llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features,
                    std::shared_ptr<PolicyModel> Model, bool Shadow = false,
                    bool PerRunnerWarnings = false);
  const std::vector<mlopt::TensorSpec> &extraOutputs() const override {
    return Model->extraOutputs();
  }
  const void *extraOutputData(size_t I) const override { return Model->extraOutputData(I); }

private:
  void *evaluateUntyped() override;
  void warnOnce(const std::string &Text);

  std::shared_ptr<PolicyModel> Model;
  bool Shadow;
  std::atomic<bool> WarnedHere{false};
  std::atomic<bool> *Warned; // per runner or per process (ThinLTO backends warn from threads)
  int64_t Decision = 0;
  int64_t *DefaultInput = nullptr; // the model's inlining_default buffer, if it takes one
  int64_t *LinkageInput = nullptr; // the model's callee_linkage buffer, if it takes one
};

} // namespace mlopt

#endif
