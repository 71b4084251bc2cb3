//===- LiteRtModel.h - a .tflite model run through LiteRT's C API -*- C++ -*-===//
//
// Contract: LiteRtModel::load(path) dlopens LiteRT's runtime (libLiteRt.so of
// the pinned ai-edge-litert 2.3.0 wheel; see findLiteRtLibrary), reads a
// .tflite file, compiles its first signature for the CPU only (GPU/NPU
// probes are skipped, LiteRT's logging is limited to errors) and binds one
// 64-byte aligned host buffer per signature input and output. inputData(i)
// and outputData(i) stay valid for the model's life; run() evaluates the
// signature on the current input bytes. Every failure throws LiteRtError
// naming the model path (and the library or tensor involved). The prototypes
// used are declared in LiteRtModel.cpp, not taken from LiteRT's headers; they
// match the 2.3.0 C API only, hence the pin.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_LITERTMODEL_H
#define MLOPT_CORE_LITERTMODEL_H

#include "ModelTensor.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlopt {

class LiteRtError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Where libLiteRt.so is looked for, in order: `Explicit` (an option), the
/// MLOPT_LITERT_LIBRARY environment variable, ai_edge_litert/ next to the
/// mlopt package that holds the calling shared object, then the dynamic
/// linker's search path.
std::vector<std::string> liteRtLibraryCandidates(const std::string &Explicit);

class LiteRtModel {
public:
  static std::unique_ptr<LiteRtModel> load(const std::string &ModelPath,
                                           const std::string &LibraryPath = "");
  ~LiteRtModel();
  LiteRtModel(const LiteRtModel &) = delete;
  LiteRtModel &operator=(const LiteRtModel &) = delete;

  const std::string &path() const { return Path; }
  const std::string &library() const { return Library; }
  const std::string &signatureKey() const { return SignatureKey; }
  const std::vector<ModelTensor> &inputs() const { return Inputs; }
  const std::vector<ModelTensor> &outputs() const { return Outputs; }
  void *inputData(size_t I) { return InputMemory[I]; }
  const void *outputData(size_t I) const { return OutputMemory[I]; }
  void run();

private:
  struct Handles;
  LiteRtModel() = default;
  static std::unique_ptr<LiteRtModel> loadUnguarded(const std::string &ModelPath,
                                                    const std::string &LibraryPath);
  std::string Path, Library, SignatureKey;
  std::vector<ModelTensor> Inputs, Outputs;
  std::vector<void *> InputMemory, OutputMemory;
  std::unique_ptr<Handles> H;
};

} // namespace mlopt

#endif
