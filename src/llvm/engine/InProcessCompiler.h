//===- InProcessCompiler.h - opt + llc inside the caller's process -*- C++ -*-===//
//
// Contract: compiles one module the way `opt-19 -passes=<pipeline>` followed
// by `llc-19 -O<level> -filetype=obj` would (same target machine set-up, same
// pass-builder options and instrumentation, same codegen flags defaults),
// entirely in memory, with mlopt's inline advisor (MLoptInlineAdvisor) in
// place of the stock one: the runner made by the caller's factory decides,
// and every model-path decision is written to an in-memory training log in
// the plugin's development-mode layout. Nothing touches the file system.
//
// Threads: every call owns its LLVMContext, module, target machines and
// analysis managers, so calls on different threads run in parallel and give
// the same bytes as sequential calls. A runner is used by one call only.
//
// With a TextSizeCache (CompileOptions::Cache), a compile can skip work an
// earlier one did: the passes before the inliner (InlinerPrefixCache.h),
// code generation of the same decisions or of unchanged functions
// (TextSizeCache.h); the output is the same bytes.
//
// Errors: unreadable or broken IR throws ModuleError (LLVM's diagnostic,
// prefixed by the module name); an unparsable pipeline, an unknown target or
// an error diagnostic raised while compiling throws CompileError. Warnings
// (e.g. a policy that answered outside {0, 1}) are returned, not printed.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_INPROCESSCOMPILER_H
#define MLOPT_LLVM_INPROCESSCOMPILER_H

#include "Errors.h"
#include "InlineFeatures.h"
#include "InlinePolicyRunner.h"
#include "ObjectTextSize.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace llvm {
class LLVMContext;
}

namespace mlopt {

class TextSizeCache;
class EvictionDecider;

/// Makes the inliner's runner for one advisor of one compile, from LLVM's
/// inputs (InlinePolicyRunner.h).
using RunnerFactory = InlineRunnerFactory;

struct CompileOptions {
  std::string Pipeline = "default<Oz>";
  /// Codegen optimization level 0-3 (llc -O<n>); -1 skips code generation.
  int CodeGenLevel = 2;
  /// Overrides the module's target triple when not empty.
  std::string TargetTriple;
  /// "static", "pic", "dynamic-no-pic", "ropi", ...; empty: the target's default
  /// (what llc does without -relocation-model).
  std::string RelocModel;
  /// Loop and SLP vectorization in the optimizer (clang's -vectorize-loops
  /// and -vectorize-slp): 1 on, 0 off, -1 opt's default for the pipeline.
  int LoopVectorize = -1;
  int SLPVectorize = -1;
  /// Code generation as lld's LTO backends do it: a section per function
  /// and per datum, and the address-significance table (what lld's ICF
  /// reads). With Pipeline "lto<O2>" (a merged full-LTO module) or
  /// "thinlto<O2>" (a ThinLTO backend's post-import module), vectorizers on
  /// and the link's relocation model, the object is the one lld links.
  bool LinkTimeCodegen = false;
  bool KeepObject = false;
  /// Also list the object's code sections in section groups (COMDAT):
  /// CompileOutput::Grouped (ObjectTextSize.h).
  bool GroupedCode = false;
  /// The training log also has callee_linkage before inlining_default
  /// (trainingLogFeatures; the inlining-linkage problem's 40th input).
  bool LogCalleeLinkage = false;
  /// Names the caller and callee of every logged decision (CallSites).
  bool RecordCallSites = false;
  /// '0'/'1' per decision: the inliner's first ForcedDecisions.size()
  /// decisions, whatever the runner answers (DecisionTrace::Forced).
  std::string ForcedDecisions;
  /// Callee name -> decision at every site calling it, after ForcedDecisions
  /// (DecisionTrace::ForcedCallees).
  std::map<std::string, bool> ForcedCallees;
  /// LLVM 22: an IR2Vec vocabulary file; the inliner's inputs (and the log)
  /// then end with callee_embedding and caller_embedding (IR2VecVocabulary.h;
  /// an unreadable vocabulary throws IR2VecVocabError, LLVM 19 too).
  std::string IR2VecVocab;
  /// Who keeps the inliner's features up to date after each inlining: mlopt
  /// (where implemented: LLVM 19 and 22 without IR2Vec) or LLVM; the same values
  /// (InlineAdvisorFactory.h).
  InlineFeatures Features = InlineFeatures::Mlopt;
  /// Register allocation through mlopt's eviction advisor (builds with
  /// regalloc support, regallocSupported()): LLVM's ML eviction advisor
  /// extracts the features, RegallocDecider decides (null: the default advisor,
  /// which gives stock code), invalid replies get the default's choice with a
  /// warning; the output gets the eviction log and per-function RegAllocScores.
  bool Regalloc = false;
  std::shared_ptr<EvictionDecider> RegallocDecider;
  unsigned RegallocMaxEvictions = 100;
  /// Code generation a trace can be shared by (TraceableCodegen.h, LLVM 19):
  /// the basic-block address map in the object, the allocation-dependent
  /// CFG passes off, as `mlopt reward build-flags` makes clang do. The
  /// options are process-wide: such a compile holds them exclusively (other
  /// compiles of the process wait). No TextSizeCache.
  bool TraceableCodegen = false;
  /// When set, code generation is skipped for a compile whose input,
  /// options and inlining decisions the cache has seen (not with KeepObject).
  TextSizeCache *Cache = nullptr;
};

struct CompileOutput {
  uint64_t TextSize = 0;            // bytes of .text sections in the object
  std::string Object;               // the object file, when KeepObject
  std::vector<GroupedCode> Grouped; // with GroupedCode: its grouped code sections
  std::string TrainingLog;          // development-mode log of the inliner's decisions
  std::vector<std::string> Warnings;
  std::vector<std::pair<std::string, std::string>> CallSites; // with RecordCallSites
  bool CacheHit = false;                                      // TextSize came from the cache
  // With Regalloc: LLVM's development-mode eviction log, each function's
  // RegAllocScore (in code generation order), and how many questions LLVM's
  // advisor asked and how many replies the default advisor's choice replaced.
  std::string RegallocLog;
  /// Per function: name, RegAllocScore, and its six weighted counts
  /// (copies, loads, stores, load-stores, cheap remats, expensive remats).
  std::vector<std::tuple<std::string, double, std::array<double, 6>>> RegallocScores;
  uint64_t RegallocQuestions = 0;
  uint64_t RegallocReplaced = 0;
};

/// Whether this build has the regalloc eviction advisor, and the LLVM
/// source version of the private headers it was built with ("" without).
bool regallocSupported();
std::string regallocSourceVersion();

/// A module checked to parse and verify, as bitcode (a .ll text is
/// converted) with its target triple (empty when it has none).
struct LoadedModule {
  std::string Bitcode;
  std::string Triple;
  /// Function definitions; of them, those with attributes only LLVM's
  /// optimizer adds (nofree, nosync, willreturn, local_unnamed_addr: the
  /// module was already optimized), and those marked optnone (-O0).
  unsigned DefinedFunctions = 0;
  unsigned OptimizedFunctions = 0;
  unsigned OptNoneFunctions = 0;
};

/// Throws ModuleError. The functions below take LoadedModule::Bitcode and do
/// not verify it again.
LoadedModule loadModule(const std::string &Bytes, const std::string &Name);

CompileOutput compileModule(const std::string &Bitcode, const std::string &Name,
                            const CompileOptions &Options, const RunnerFactory &MakeRunner);

} // namespace mlopt

#endif
