//===- InlinerPrefixSkip.h - record or skip the passes before the inliner -*- C++ -*-===//
//
// Contract: pass instrumentation for one compile of a pipeline with an
// inliner (a ModuleInlinerWrapperPass, as in every default<Ox> but O0).
//  - Record: when the first inliner starts, the module is written as
//    bitcode (use-list order kept) with the warnings raised so far;
//    recorded() is then set. Not recorded: modules with debug info (on
//    the Debian corpus, LLVM 19's round trip of 6 of them lost a use of a
//    function: other inliner features, other DWARF) and with coroutines
//    (CoroEarly, which runs again below, is not known to be idempotent).
//  - Resume: the compile starts from such a recorded module; every
//    optional pass before the first inliner is skipped. Passes LLVM marks
//    required (always-inline, ee-instrument, coro-early) cannot be skipped
//    and run again; on the module they already ran on they change nothing.
// Either way, what runs from the inliner on is the pipeline's own.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INLINERPREFIXSKIP_H
#define MLOPT_LLVM_INLINERPREFIXSKIP_H

#include "InlinerPrefixCache.h"

#include "llvm/IR/PassInstrumentation.h"

#include <optional>
#include <string>
#include <vector>

namespace mlopt {

class InlinerPrefixSkip {
public:
  enum class Mode { Record, Resume };

  /// Warnings: the compile's collected warnings (read when recording).
  InlinerPrefixSkip(Mode M, const std::vector<std::string> &Warnings) : M(M), Warnings(Warnings) {}

  void registerCallbacks(llvm::PassInstrumentationCallbacks &PIC);

  /// Whether the inliner started (Resume: the skipping ended there).
  bool reachedInliner() const { return Reached; }
  /// Record: the module at the inliner's start, if it could be recorded.
  std::optional<InlinerPrefix> &recorded() { return Recorded; }

private:
  Mode M;
  const std::vector<std::string> &Warnings;
  bool Reached = false;
  std::optional<InlinerPrefix> Recorded;
};

} // namespace mlopt

#endif
