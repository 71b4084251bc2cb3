//===- PolicyModel.h - A trained policy bound to the compiler's features -*- C++ -*-===//
//
// Contract: a PolicyModel is a loaded policy whose inputs have been bound, by
// name, to a list of feature TensorSpecs (any problem's: LLVM's 38 int64 [1]
// inliner features, regalloc's [1,33] tensors, ...) and whose outputs have
// been resolved into the decision and the extra outputs to log. The caller
// writes feature I's bytes to featureBuffer(I), calls evaluate(), then reads
// decisionIndex() (or the raw decision bytes) and the extras.
// All validation happens in load(): a missing, unknown, mistyped or
// misshaped tensor throws PolicyError naming the model path and the tensor,
// so a compiler reports it before its first decision.
//
// Accepted forms (loadPolicyModel dispatches on the path):
//  - a model directory in LLVM's ModelUnderTraining layout: model.tflite +
//    output_spec.json (decision first, then extra outputs renamed to their
//    logging_name); inputs bound as "<prefix><feature>:<port>";
//  - a bare .tflite file: the decision is the output named like the decision
//    spec (signature or tensor name) or the only output; no extras;
//  - a compiled policy .so (CompiledPolicy.h: mlopt's versioned C ABI;
//    its output spec is embedded).
// Features named in PolicyLoadOptions::OptionalFeatures may have no model
// input (a policy trained without LLVM 22's IR2Vec embeddings runs where
// the compiler provides them): their featureBuffer() is scratch memory the
// model never reads, and featureBound() is false. A model input that is no
// feature is still an error, naming the tensor.
// Tensor names are matched as LLVM does ("<prefix><name>:<port>"); the
// signature names of TensorFlow's converter ("<name>", "<prefix><name>") are
// accepted too. Model inputs LLVM declares for training only (discount,
// reward, step_type) are allowed and zero-filled.
//
// Decisions: one element of int64_t, int32_t or float. decisionIndex() is
// the value as an index when it is integral (an integer output, or a float
// holding an integral value); which indices are valid is the caller's rule
// (the inliner's runner accepts 0 and 1 and falls back to the heuristic,
// warning once, for anything else). This core applies no problem's rule.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_POLICYMODEL_H
#define MLOPT_CORE_POLICYMODEL_H

#include "TensorSpec.h"

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlopt {

class PolicyError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct PolicyLoadOptions {
  std::string FeedPrefix = "action_"; // LLVM's -ml-inliner-trained-model-feed-prefix
  std::string DecisionName = "inlining_decision";
  std::string LiteRtLibrary;                 // empty: liteRtLibraryCandidates()
  std::vector<std::string> OptionalFeatures; // may have no model input
};

class PolicyModel {
public:
  virtual ~PolicyModel() = default;
  const std::string &path() const { return Path; }
  const std::vector<TensorSpec> &features() const { return Features; }
  void *featureBuffer(size_t I) { return FeatureBuffers[I]; }
  /// Whether feature I feeds a model input (false: an optional feature the
  /// model does not take).
  bool featureBound(size_t I) const { return Scratch[I].empty(); }

  /// Runs the policy on the current feature buffers.
  virtual void evaluate() = 0;
  /// The decision output: its spec (named by PolicyLoadOptions::DecisionName)
  /// and its bytes after evaluate().
  const TensorSpec &decisionSpec() const { return DecisionSpec; }
  const void *decisionData() const { return DecisionData; }
  /// The decision as an integral index after evaluate(); nullopt when it is
  /// not integral (a float like 0.5, NaN, or out of int64's range).
  std::optional<int64_t> decisionIndex() const;
  /// The decision output's raw value, for messages ("7", "0.5").
  std::string rawDecision() const;

  /// Extra outputs (named by their logging_name) and their bytes after evaluate().
  const std::vector<TensorSpec> &extraOutputs() const { return Extras; }
  const void *extraOutputData(size_t I) const { return ExtraData[I]; }

  /// What kind of model this is, e.g. "tflite" or "compiled".
  virtual const char *kind() const = 0;

protected:
  std::string Path;
  std::vector<TensorSpec> Features;
  std::vector<void *> FeatureBuffers;
  std::vector<std::vector<unsigned char>> Scratch; // per feature; empty when bound
  TensorSpec DecisionSpec{"inlining_decision", TensorType::Int64, {1}};
  const void *DecisionData = nullptr;
  std::vector<TensorSpec> Extras;
  std::vector<const void *> ExtraData;
};

std::unique_ptr<PolicyModel> loadPolicyModel(const std::string &Path,
                                             const std::vector<TensorSpec> &Features,
                                             const PolicyLoadOptions &Options = {});

} // namespace mlopt

#endif
