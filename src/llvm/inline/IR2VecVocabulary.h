//===- IR2VecVocabulary.h - IR2Vec seed embeddings, read by LLVM -*- C++ -*-===//
//
// Contract: an IR2Vec vocabulary file (LLVM 22's seed-embedding JSON:
// "Opcodes", "Types", "Arguments") as LLVM itself reads it:
//  - loadIR2VecVocabulary(Path) runs LLVM's IR2VecVocabAnalysis with
//    -ir2vec-vocab-path=Path (and the current -ir2vec-*-weight options),
//    restores the option, and keeps the weighted embeddings, by section, in a
//    process-wide cache keyed by path, size and modification time. It sets a
//    global LLVM option for a moment: call it while no other thread reads
//    LLVM's options (the engine holds its option lock exclusively; a plugin
//    calls it from its single compiling thread). cachedIR2VecVocabulary(Path)
//    returns a cached entry (null if none or the file changed) without
//    touching options.
//  - registerIR2VecVocabulary(MAM, V) registers IR2VecVocabAnalysis over V
//    in MAM; register it before the standard analyses so it is the one used.
// Errors throw IR2VecVocabError "<path>: <LLVM's message>"; on LLVM 19 every
// call throws (IR2Vec needs LLVM 21 or later).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_IR2VECVOCABULARY_H
#define MLOPT_LLVM_IR2VECVOCABULARY_H

#include "llvm/Config/llvm-config.h"
#include "llvm/IR/PassManager.h"

// Every file that names IR2VecVocabAnalysis includes this header.
#if LLVM_VERSION_MAJOR >= 22
// A weak reference: LLVM 19's tools load the 22 plugin far enough for its
// version check (HostVersionCheck.cpp) to say which plugin to use, instead
// of failing on this data symbol, which only 21+ define.
asm(".weak _ZN4llvm19IR2VecVocabAnalysis3KeyE");
#endif

#include <memory>
#include <string>
#include <vector>

namespace mlopt {

struct IR2VecVocabulary {
  std::string Path;
  unsigned Dimension = 0;
  std::vector<std::vector<std::vector<double>>> Sections; // section -> entry -> vector
};

std::shared_ptr<const IR2VecVocabulary> cachedIR2VecVocabulary(const std::string &Path);
std::shared_ptr<const IR2VecVocabulary> loadIR2VecVocabulary(const std::string &Path);
void registerIR2VecVocabulary(llvm::ModuleAnalysisManager &MAM,
                              std::shared_ptr<const IR2VecVocabulary> V);

} // namespace mlopt

#endif
