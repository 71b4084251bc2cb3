//===- TensorSpecConversion.h - llvm::TensorSpec -> mlopt -------*- C++ -*-===//
//
// Contract: converts LLVM's tensor specs (as exported by libLLVM: the
// inliner's FeatureMap, decision specs, model outputs) into mlopt's core
// TensorSpec, keeping name, type, shape and port.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_TENSORSPECCONVERSION_H
#define MLOPT_LLVM_TENSORSPECCONVERSION_H

#include "TensorSpec.h"

#include "llvm/Analysis/TensorSpec.h"

#include <vector>

namespace mlopt {

mlopt::TensorSpec fromLLVM(const llvm::TensorSpec &S);
/// LLVM 19's 38 inliner input specs (llvm::FeatureMap), in tensor order.
std::vector<mlopt::TensorSpec> inlinerFeatureSpecs();

} // namespace mlopt

#endif
