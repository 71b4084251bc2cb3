//===- CalleeLinkage.h - What becomes of a callee's body ---------*- C++ -*-===//
//
// Contract: calleeLinkageClass(F) is the class of F's linkage that decides
// what inlining does to its body, as the int64 a policy input named
// callee_linkage sees: 0 external (the body stays whatever the sites do),
// 1 local (internal/private: it goes away with its last call), 2 linkonce
// (linkonce/linkonce_odr: discardable once unused), 3 available_externally
// (never emitted; the code exists only where inlined), 4 any other (weak,
// weak_odr, common, extern_weak) and a null F (an indirect call).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_CALLEELINKAGE_H
#define MLOPT_LLVM_CALLEELINKAGE_H

#include <cstdint>

namespace llvm {
class Function;
}

namespace mlopt {

/// The policy input that sees calleeLinkageClass of the call site's callee.
inline constexpr const char *CalleeLinkageInput = "callee_linkage";

int64_t calleeLinkageClass(const llvm::Function *F);

} // namespace mlopt

#endif
