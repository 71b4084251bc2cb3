//===- EvictionDecider.h - Who picks the column to evict ---------*- C++ -*-===//
//
// Contract: an EvictionDecider answers one eviction question from the
// tensors LLVM's ML eviction advisor extracted (Header/Payload as written on
// its channel: 20 features of [1,33] and progress, LLVM's order and types).
// decide() returns the chosen column, or nullopt with Raw set when the
// answer is not an integer at all (NaN, 0.5); range and mask are checked by
// the caller (EvictionSession), never trusted. It runs on the channel's
// thread, one question at a time; it may throw (the default advisor then
// decides, with a warning).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_EVICTIONDECIDER_H
#define MLOPT_LLVM_EVICTIONDECIDER_H

#include "PolicyModel.h"
#include "TrainingLogParser.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mlopt {

struct EvictionQuestion {
  const LogHeader &Header;
  const char *Payload;
  /// The column the default advisor would pick (32: evict nothing).
  int64_t DefaultIndex;
};

class EvictionDecider {
public:
  virtual ~EvictionDecider() = default;
  virtual std::optional<int64_t> decide(const EvictionQuestion &Q, std::string &Raw) = 0;
};

/// LLVM's 21 eviction features (MLRegAllocEvictAdvisor.cpp, 19-22): 20 of
/// shape [1,33] and progress [1], in LLVM's order.
std::vector<TensorSpec> evictionFeatureSpecs();

/// A policy model (.tflite, model directory or compiled .so) over LLVM's
/// eviction features, bound by name on the first question.
class PolicyEvictionDecider final : public EvictionDecider {
public:
  explicit PolicyEvictionDecider(std::shared_ptr<PolicyModel> Model) : Model(std::move(Model)) {}
  std::optional<int64_t> decide(const EvictionQuestion &Q, std::string &Raw) override;

private:
  std::shared_ptr<PolicyModel> Model;
  /// Per model feature: its offset in the payload.
  std::vector<size_t> Offsets;
};

} // namespace mlopt

#endif
