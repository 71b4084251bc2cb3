#include "CalleeLinkage.h"

#include "llvm/IR/Function.h"

namespace mlopt {

int64_t calleeLinkageClass(const llvm::Function *F) {
  if (!F)
    return 4;
  if (F->hasExternalLinkage())
    return 0;
  if (F->hasLocalLinkage())
    return 1;
  if (F->hasLinkOnceLinkage())
    return 2;
  if (F->hasAvailableExternallyLinkage())
    return 3;
  return 4;
}

} // namespace mlopt
