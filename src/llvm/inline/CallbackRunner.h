//===- CallbackRunner.h - A function as the inliner's policy -----*- C++ -*-===//
//
// Contract: an InlinePolicyRunner that hands each call site's inputs and the
// stock heuristic's decision and the callee's linkage class (tellCallee) to a
// function and answers what it returns. The
// function sees the int64 inputs as one contiguous row (the 38 features, in
// inputs() order) and the float inputs (IR2Vec's callee_embedding then
// caller_embedding on LLVM 22 with a vocabulary; none otherwise) as a
// second row. It must return 0 or 1; it is responsible for its own errors
// (the Python binding records an exception and answers the heuristic's
// decision from then on); anything it throws is caught here and answered
// with the heuristic's decision. Inputs of another type make the
// constructor throw.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_CALLBACKRUNNER_H
#define MLOPT_LLVM_CALLBACKRUNNER_H

#include "InlinePolicyRunner.h"

#include <functional>
#include <stdexcept>

namespace mlopt {

using InlineDecisionFunction =
    std::function<int64_t(const int64_t *Ints, size_t IntCount, const float *Floats,
                          size_t FloatCount, int64_t Default, int64_t CalleeLinkage)>;

class CallbackRunner final : public InlinePolicyRunner {
public:
  CallbackRunner(llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features,
                 InlineDecisionFunction Decide)
      : InlinePolicyRunner(Ctx, Kind::Development, Features), Decide(std::move(Decide)) {
    size_t IntCount = 0, FloatCount = 0;
    for (const mlopt::TensorSpec &S : inputs()) {
      if (S.type() == TensorType::Int64)
        IntCount += S.elementCount();
      else if (S.type() == TensorType::Float)
        FloatCount += S.elementCount();
      else
        throw std::runtime_error("a policy callable cannot take input '" + S.name() + "' of type " +
                                 tensorTypeName(S.type()));
    }
    Ints.assign(IntCount, 0);
    Floats.assign(FloatCount, 0.0f);
    size_t IntAt = 0, FloatAt = 0;
    for (size_t I = 0; I < inputs().size(); ++I) {
      const mlopt::TensorSpec &S = inputs()[I];
      void *Buffer = S.type() == TensorType::Int64 ? static_cast<void *>(&Ints[IntAt])
                                                   : static_cast<void *>(&Floats[FloatAt]);
      (S.type() == TensorType::Int64 ? IntAt : FloatAt) += S.elementCount();
      setUpBufferForTensor(I, Features[I], Buffer);
    }
  }

private:
  void *evaluateUntyped() override {
    try { // nothing may unwind through LLVM's frames
      Decision = Decide(Ints.data(), Ints.size(), Floats.data(), Floats.size(), defaultDecision(),
                        calleeLinkage());
    } catch (...) {
      Decision = defaultDecision();
    }
    return &Decision;
  }
  std::vector<int64_t> Ints;
  std::vector<float> Floats;
  InlineDecisionFunction Decide;
  int64_t Decision = 0;
};

} // namespace mlopt

#endif
