//===- TfliteVerifier.h - Structural checks of a .tflite flatbuffer -*- C++ -*-===//
//
// Contract: tfliteModelProblem(Data, Size) returns "" when the bytes are a
// TFLite model that can be handed to LiteRT without it reading outside
// them, and otherwise one line saying what is wrong and where ("byte 1234:
// vector of tensor 7's shape runs past the end of the 2000-byte file").
// Checked, for everything reachable from the root through the fields LiteRT
// reads: the TFL3 identifier; every table, vtable, vector and string lies
// inside the buffer, aligned, strings NUL-terminated; indices are in range
// (operator codes, tensors, buffers, subgraphs, signature tensors); shapes
// are non-negative, each tensor at most 64 MiB and all of them at most
// 512 MiB (a policy never needs more; a model that asks for gigabytes must
// not make the compiler allocate them); a constant tensor's
// buffer holds exactly its bytes; builtin options match their union type.
// What mlopt's policies never use, and so does not check further, is
// refused by name: sparse or variant tensors, external buffers, quantization
// details, custom or large custom options, BuiltinOptions2, unknown option
// types. Runs in time linear in the buffer size, never throws, never reads
// outside [Data, Data + Size).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TFLITEVERIFIER_H
#define MLOPT_CORE_TFLITEVERIFIER_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace mlopt {

std::string tfliteModelProblem(const uint8_t *Data, size_t Size);

} // namespace mlopt

#endif
