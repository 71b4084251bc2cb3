//===- CompiledPolicy.h - An ahead-of-time compiled policy (.so) -*- C++ -*-===//
//
// Contract: loads a shared object produced by `mlopt policy compile` and
// exposes it like LiteRtModel (inputs, outputs, host buffers, run) so the
// same PolicyModel binding applies. The .so exports mlopt's versioned C ABI:
//
//   int         mlopt_policy_abi_version(void);      // == 1
//   const char *mlopt_policy_signature(void);        // JSON, see below
//   int         mlopt_policy_evaluate(const void *const *inputs,
//                                     void *const *outputs);  // 0 = ok
//
// The signature is {"inputs": [T...], "outputs": [T...], "output_spec": S}
// with T = {"signature_name", "tensor_name", "type" (LLVM's type names),
// "shape"} and S the model directory's output_spec.json array, or null when
// compiled from a bare .tflite. Inputs and outputs are passed in signature
// order as pointers to dense row-major buffers. A missing symbol, another
// ABI version or a malformed signature throws PolicyError naming the file.
// The .so is loaded from a private, unnamed copy (a memfd): replacing or
// truncating the file afterwards does not affect a loaded policy, and no
// temporary file is written.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_COMPILEDPOLICY_H
#define MLOPT_CORE_COMPILEDPOLICY_H

#include "Json.h"
#include "ModelTensor.h"

#include <memory>
#include <string>
#include <vector>

namespace mlopt {

constexpr int CompiledPolicyABIVersion = 1;

/// What mlopt_policy_signature() describes, parsed and checked (tensors of
/// at most 32 dimensions and 64 MiB). Throws PolicyError naming Path.
struct CompiledPolicySignature {
  std::vector<ModelTensor> Inputs, Outputs;
  json::Value OutputSpec;
};
CompiledPolicySignature parseCompiledPolicySignature(const char *Text, const std::string &Path);

class CompiledPolicy {
public:
  static std::unique_ptr<CompiledPolicy> load(const std::string &Path);
  ~CompiledPolicy();
  CompiledPolicy(const CompiledPolicy &) = delete;
  CompiledPolicy &operator=(const CompiledPolicy &) = delete;

  const std::string &path() const { return Path; }
  const std::vector<ModelTensor> &inputs() const { return Inputs; }
  const std::vector<ModelTensor> &outputs() const { return Outputs; }
  void *inputData(size_t I) { return InputMemory[I]; }
  const void *outputData(size_t I) const { return OutputMemory[I]; }
  /// The embedded output_spec.json array (Kind Null when there is none).
  const json::Value &outputSpec() const { return OutputSpec; }
  void run();

private:
  CompiledPolicy() = default;
  std::string Path;
  void *Handle = nullptr;
  int (*Evaluate)(const void *const *, void *const *) = nullptr;
  std::vector<ModelTensor> Inputs, Outputs;
  std::vector<void *> InputMemory, OutputMemory;
  json::Value OutputSpec;
};

} // namespace mlopt

#endif
