#include "TensorSpecConversion.h"

#include "LLVMVersion.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"

namespace mlopt {

static mlopt::TensorType typeOf(const llvm::TensorSpec &S) {
  switch (S.type()) {
  case llvm::TensorType::Float:
    return mlopt::TensorType::Float;
  case llvm::TensorType::Double:
    return mlopt::TensorType::Double;
  case llvm::TensorType::Int8:
    return mlopt::TensorType::Int8;
  case llvm::TensorType::UInt8:
    return mlopt::TensorType::UInt8;
  case llvm::TensorType::Int16:
    return mlopt::TensorType::Int16;
  case llvm::TensorType::UInt16:
    return mlopt::TensorType::UInt16;
  case llvm::TensorType::Int32:
    return mlopt::TensorType::Int32;
  case llvm::TensorType::UInt32:
    return mlopt::TensorType::UInt32;
  case llvm::TensorType::Int64:
    return mlopt::TensorType::Int64;
  case llvm::TensorType::UInt64:
    return mlopt::TensorType::UInt64;
  default:
    return mlopt::TensorType::Invalid;
  }
}

mlopt::TensorSpec fromLLVM(const llvm::TensorSpec &S) {
  return mlopt::TensorSpec(S.name(), typeOf(S), S.shape(), S.port());
}

std::vector<mlopt::TensorSpec> inlinerFeatureSpecs() {
  std::vector<mlopt::TensorSpec> Specs;
  for (const llvm::TensorSpec &S : inlinerFeatures())
    Specs.push_back(fromLLVM(S));
  return Specs;
}

} // namespace mlopt
