#include "PassModule.h"

#include "llvm/ADT/Any.h"
#include "llvm/IR/Module.h"

// A specialization without an initializer declares, it does not define: the
// plugin refers to libLLVM's Id (see the header).
template <> char llvm::Any::TypeId<const llvm::Module *>::Id;

namespace mlopt {

const llvm::Module *passModule(const llvm::Any &IR) {
  const llvm::Module *const *M = llvm::any_cast<const llvm::Module *>(&IR);
  return M ? *M : nullptr;
}

bool isMergedLTOModule(const llvm::Module &M) { return M.getModuleIdentifier() == "ld-temp.o"; }

} // namespace mlopt
