//===- LLVMVersion.h - What differs between the LLVM majors mlopt supports -*- C++ -*-===//
//
// Contract: the one place where mlopt's LLVM code depends on the LLVM major
// it is compiled against (19 or 22; CMake builds every LLVM part once per
// major found). Everything else uses these names:
//  - inlinerFeatures(): the 38 int64 inliner input specs, in tensor order
//    (19: llvm::FeatureMap; 22: MLInlineAdvisor::getInitialFeatureMap(),
//    which has the same 38 -- IR2Vec embeddings are appended at run time
//    only when a vocabulary is given).
//  - InlinerFeatureCount: 38, checked against the headers where they say.
//  - moduleTriple()/setModuleTriple(): a module's target triple as a string
//    (19 stores a string, 22 an llvm::Triple).
// Adding a major is a row here and in the CMake version table.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_LLVMVERSION_H
#define MLOPT_LLVM_LLVMVERSION_H

#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/TensorSpec.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Module.h"
#include "llvm/TargetParser/Triple.h"

#include <cstddef>
#include <string>
#include <vector>

#if LLVM_VERSION_MAJOR != 19 && LLVM_VERSION_MAJOR != 22
#error "mlopt supports LLVM 19 and 22"
#endif

namespace mlopt {

constexpr size_t InlinerFeatureCount = 38;
#if LLVM_VERSION_MAJOR == 19
static_assert(llvm::NumberOfFeatures == InlinerFeatureCount);
#else
static_assert(static_cast<size_t>(llvm::FeatureIndex::callee_embedding) == InlinerFeatureCount);
#endif

const std::vector<llvm::TensorSpec> &inlinerFeatures();

inline std::string moduleTriple(const llvm::Module &M) {
#if LLVM_VERSION_MAJOR >= 21
  return M.getTargetTriple().str();
#else
  return M.getTargetTriple();
#endif
}

/// What TargetRegistry's createTargetMachine takes for a triple.
#if LLVM_VERSION_MAJOR >= 21
inline const llvm::Triple &targetTripleArg(const llvm::Triple &T) { return T; }
#else
inline llvm::StringRef targetTripleArg(const llvm::Triple &T) { return T.getTriple(); }
#endif

inline void setModuleTriple(llvm::Module &M, const std::string &Triple) {
#if LLVM_VERSION_MAJOR >= 21
  M.setTargetTriple(llvm::Triple(Triple));
#else
  M.setTargetTriple(Triple);
#endif
}

} // namespace mlopt

#endif
