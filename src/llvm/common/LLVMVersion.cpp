#include "LLVMVersion.h"

#if LLVM_VERSION_MAJOR >= 22
#include "llvm/Analysis/MLInlineAdvisor.h"
#endif

namespace mlopt {

const std::vector<llvm::TensorSpec> &inlinerFeatures() {
#if LLVM_VERSION_MAJOR == 19
  return llvm::FeatureMap;
#else
  static const std::vector<llvm::TensorSpec> Features = [] {
    const std::vector<llvm::TensorSpec> &All = llvm::MLInlineAdvisor::getInitialFeatureMap();
    return std::vector<llvm::TensorSpec>(All.begin(), All.begin() + InlinerFeatureCount);
  }();
  return Features;
#endif
}

} // namespace mlopt
