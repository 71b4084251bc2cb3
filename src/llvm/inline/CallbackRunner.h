//===- CallbackRunner.h - A function as the inliner's policy -----*- C++ -*-===//
//
// Contract: an InlinePolicyRunner that hands each call site's 38 features
// (int64, inlinerFeatures() order, one contiguous row) and the stock
// heuristic's decision to a function and answers what it returns. The
// function must return 0 or 1; it is responsible for its own errors (the
// Python binding records an exception and answers the heuristic's decision
// from then on); anything it throws is caught here and answered with the
// heuristic's decision.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_CALLBACKRUNNER_H
#define MLOPT_LLVM_CALLBACKRUNNER_H

#include "InlinePolicyRunner.h"

#include <array>
#include <functional>

namespace mlopt {

using InlineDecisionFunction =
    std::function<int64_t(const int64_t *Features, size_t Count, int64_t Default)>;

class CallbackRunner final : public InlinePolicyRunner {
public:
  CallbackRunner(llvm::LLVMContext &Ctx, InlineDecisionFunction Decide)
      : InlinePolicyRunner(Ctx, Kind::Development), Decide(std::move(Decide)) {
    Row.fill(0);
    for (size_t I = 0; I < inlinerFeatures().size(); ++I)
      setUpBufferForTensor(I, inlinerFeatures()[I], &Row[I]);
  }

private:
  void *evaluateUntyped() override {
    try { // nothing may unwind through LLVM's frames
      Decision = Decide(Row.data(), inlinerFeatures().size(), DefaultDecision);
    } catch (...) {
      Decision = DefaultDecision;
    }
    return &Decision;
  }
  std::array<int64_t, InlinerFeatureCount> Row;
  InlineDecisionFunction Decide;
  int64_t Decision = 0;
};

} // namespace mlopt

#endif
