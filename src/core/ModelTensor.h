//===- ModelTensor.h - One input or output of a policy model ----*- C++ -*-===//
//
// Contract: describes a signature tensor of a loaded model (a .tflite run by
// LiteRT or a compiled policy .so) as the model declares it: its signature
// and tensor names, element type (KnownType false when mlopt has no
// TensorSpec type for it, e.g. bool), static shape and byte size.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_MODELTENSOR_H
#define MLOPT_CORE_MODELTENSOR_H

#include "TensorSpec.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlopt {

/// One signature input or output as the model declares it.
struct ModelTensor {
  std::string SignatureName; // key in the SignatureDef
  std::string TensorName;    // the tensor's own name, e.g. "action_callee_users:0"
  bool KnownType = false;    // false: an element type mlopt has no TensorSpec type for
  TensorType Type = TensorType::Float;
  std::vector<int64_t> Shape;
  size_t ByteSize = 0;
  std::string describe() const; // e.g. "int64_t [1]"
};

/// Zero-filled, 64-byte aligned host memory for a tensor of ByteSize bytes
/// (at least 64), released with std::free. *Allocated receives the size.
void *allocateTensorMemory(size_t ByteSize, size_t *Allocated = nullptr);

} // namespace mlopt

#endif
