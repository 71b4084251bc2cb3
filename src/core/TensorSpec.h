//===- TensorSpec.h - Name, port, element type and shape of a tensor -*- C++ -*-===//
//
// Contract: an immutable description of one tensor exchanged with a policy,
// equivalent to llvm::TensorSpec (LLVM 19). The element types are LLVM's ten
// (JSON names "float", "double", "int8_t" ... "uint64_t"). An empty shape is a
// scalar (one element). The byte size is element count x element size, with
// no padding, row-major. toJSON() is byte-identical to LLVM's
// TensorSpec::toJSON through a compact json::OStream: keys name, type, port,
// shape, in that order. fromJSON() requires all four keys (any order) and
// throws SpecError naming what is wrong. A shape has at most 32 dimensions
// and at most 2^40 bytes (SpecError otherwise).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TENSORSPEC_H
#define MLOPT_CORE_TENSORSPEC_H

#include "Json.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mlopt {

/// Declaration order gives LLVM's enum values (Invalid = 0).
enum class TensorType : int {
  Invalid = 0,
  Float,
  Double,
  Int8,
  UInt8,
  Int16,
  UInt16,
  Int32,
  UInt32,
  Int64,
  UInt64,
};

/// LLVM's JSON spelling ("int64_t"), or "INVALID".
const char *tensorTypeName(TensorType T);
/// Parses a JSON spelling; nullopt for anything else.
std::optional<TensorType> tensorTypeFromName(std::string_view Name);
/// sizeof the C type; 0 for Invalid.
size_t tensorTypeSize(TensorType T);
/// numpy's type character code for the element type ('f', 'q', ...).
char tensorTypeNumpyChar(TensorType T);

class SpecError : public std::invalid_argument {
public:
  using std::invalid_argument::invalid_argument;
};

class TensorSpec {
public:
  /// Throws SpecError for an Invalid type, a negative dimension or a tensor
  /// larger than 2^40 bytes.
  TensorSpec(std::string Name, TensorType Type, std::vector<int64_t> Shape, int Port = 0);
  /// LLVM's renaming constructor: a copy of Other named NewName.
  TensorSpec(std::string NewName, const TensorSpec &Other);

  const std::string &name() const { return Name; }
  int port() const { return Port; }
  TensorType type() const { return Type; }
  const std::vector<int64_t> &shape() const { return Shape; }
  size_t elementCount() const { return ElementCount; }
  size_t elementByteSize() const { return tensorTypeSize(Type); }
  size_t byteSize() const { return ElementCount * tensorTypeSize(Type); }

  bool operator==(const TensorSpec &O) const {
    return Name == O.Name && Port == O.Port && Type == O.Type && Shape == O.Shape;
  }
  bool operator!=(const TensorSpec &O) const { return !(*this == O); }

  /// Appends {"name":..,"type":..,"port":..,"shape":[..]}.
  void appendJSON(std::string &Out) const;
  std::string toJSON() const;
  /// "int64_t [1]": the type and shape, for messages.
  std::string typeAndShape() const;
  /// Throws SpecError("<reason>") for a malformed description.
  static TensorSpec fromJSON(const json::Value &V);

private:
  std::string Name;
  int Port;
  TensorType Type;
  std::vector<int64_t> Shape;
  size_t ElementCount;
};

} // namespace mlopt

#endif
