//===- PassModule.h - The module a pass instrumentation callback sees -*- C++ -*-===//
//
// Contract: passModule(IR) is the module when a pass instrumentation
// callback's IR (llvm::Any) holds a module, nullptr otherwise (a function,
// a loop, an SCC). llvm::Any tells types apart by the address of
// Any::TypeId<T>::Id; the plugin is built with hidden visibility, so it uses
// libLLVM's Id for const Module * (an instantiation of its own would never
// match what the pass manager stores). isMergedLTOModule(M): M is the
// merged module of a full-LTO link (LLVM's LTO names it "ld-temp.o"), not a
// ThinLTO backend's.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PLUGIN_PASSMODULE_H
#define MLOPT_PLUGIN_PASSMODULE_H

namespace llvm {
class Any;
class Module;
} // namespace llvm

namespace mlopt {

const llvm::Module *passModule(const llvm::Any &IR);

bool isMergedLTOModule(const llvm::Module &M);

} // namespace mlopt

#endif
