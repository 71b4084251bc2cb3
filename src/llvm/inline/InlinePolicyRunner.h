//===- InlinePolicyRunner.h - mlopt's inliner model runners -----*- C++ -*-===//
//
// Contract: an llvm::MLModelRunner over LLVM 19's 38 inliner features
// (llvm::FeatureMap order) whose evaluate<int64_t>() is the inlining
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
  InlinePolicyRunner(llvm::LLVMContext &Ctx, Kind K)
      : MLModelRunner(Ctx, K, llvm::FeatureMap.size()) {}
  int64_t DefaultDecision = 0;
};

/// No model: the decision is the stock heuristic's.
class HeuristicRunner final : public InlinePolicyRunner {
public:
  explicit HeuristicRunner(llvm::LLVMContext &Ctx) : InlinePolicyRunner(Ctx, Kind::NoOp) {
    for (size_t I = 0; I < llvm::FeatureMap.size(); ++I)
      setUpBufferForTensor(I, llvm::FeatureMap[I], nullptr);
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
