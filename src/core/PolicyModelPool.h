//===- PolicyModelPool.h - One policy, loaded once per concurrent user -*- C++ -*-===//
//
// Contract: a PolicyModel holds its own input and output buffers, so one
// instance serves one compile at a time. A PolicyModelPool loads the policy
// (loadPolicyModel, same options, same errors) once when constructed, and
// again whenever more compiles run at the same time than it has idle
// instances. acquire() lends an instance until the returned pointer is
// released; it is thread-safe. Instances are never unloaded before the pool.
// One pool serves everything that runs a policy in a process: batch
// evaluation from Python and in-process compiles alike.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_POLICYMODELPOOL_H
#define MLOPT_CORE_POLICYMODELPOOL_H

#include "PolicyModel.h"

#include <memory>
#include <mutex>
#include <vector>

namespace mlopt {

class PolicyModelPool : public std::enable_shared_from_this<PolicyModelPool> {
public:
  static std::shared_ptr<PolicyModelPool> load(std::string Path, std::vector<TensorSpec> Features,
                                               PolicyLoadOptions Options);

  /// An instance for the caller's exclusive use; returned to the pool when
  /// the last copy of the pointer goes away.
  std::shared_ptr<PolicyModel> acquire();

  const std::string &path() const { return Path; }
  const std::string &kind() const { return Kind; }
  const std::vector<TensorSpec> &features() const { return Features; }
  /// The features the model takes (features() less optional ones it lacks).
  const std::vector<TensorSpec> &modelInputs() const { return Inputs; }
  const TensorSpec &decisionSpec() const { return Decision; }
  const std::vector<TensorSpec> &extraOutputs() const { return Extras; }
  size_t loadedInstances() const;

private:
  PolicyModelPool(std::string Path, std::vector<TensorSpec> Features, PolicyLoadOptions Options);
  std::string Path;
  std::vector<TensorSpec> Features;
  std::vector<TensorSpec> Inputs;
  PolicyLoadOptions Options;
  std::string Kind;
  TensorSpec Decision{"", TensorType::Int64, {1}};
  std::vector<TensorSpec> Extras;
  mutable std::mutex Lock;
  std::vector<std::unique_ptr<PolicyModel>> Idle;
  size_t Loaded = 0;
};

} // namespace mlopt

#endif
