//===- InlinePolicyRunner.h - mlopt's inliner model runners -----*- C++ -*-===//
//
// Contract: an llvm::MLModelRunner over LLVM 19's 38 inliner features
// (inlinerFeatures() order) whose evaluate<int64_t>() is the inlining
// decision. Before each evaluation the advisor calls setDefaultDecision()
// with the stock heuristic's answer for the same call site, so a runner can
// fall back to it (a dead host, a stalled model). Input buffers are never
// modified by evaluation. extraOutputs() lists model outputs beyond the
// decision that the training log records after the features; their bytes
// are valid after evaluate().
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINEPOLICYRUNNER_H
#define MLOPT_LLVM_INLINEPOLICYRUNNER_H

#include "TensorSpec.h"

#include "LLVMVersion.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/MLModelRunner.h"
#include "llvm/Analysis/TensorSpec.h"

#include <vector>

namespace mlopt {

class InlinePolicyRunner : public llvm::MLModelRunner {
public:
  void setDefaultDecision(bool Inline) { DefaultDecision = Inline ? 1 : 0; }
  virtual const std::vector<mlopt::TensorSpec> &extraOutputs() const {
    static const std::vector<mlopt::TensorSpec> None;
    return None;
  }
  virtual const void *extraOutputData(size_t) const { return nullptr; }

protected:
  InlinePolicyRunner(llvm::LLVMContext &Ctx, Kind K, size_t NumInputs = InlinerFeatureCount)
      : MLModelRunner(Ctx, K, NumInputs) {}
  int64_t DefaultDecision = 0;
};

/// No model: the decision is the stock heuristic's. Its inputs are the 38
/// features, or any feature list LLVM hands over (a fallback when another
/// runner cannot take that list).
class HeuristicRunner final : public InlinePolicyRunner {
public:
  explicit HeuristicRunner(llvm::LLVMContext &Ctx) : HeuristicRunner(Ctx, inlinerFeatures()) {}
  HeuristicRunner(llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features)
      : InlinePolicyRunner(Ctx, Kind::NoOp, Features.size()) {
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
