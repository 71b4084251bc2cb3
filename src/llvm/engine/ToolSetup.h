//===- ToolSetup.h - What opt-19 and llc-19 do around their passes -*- C++ -*-===//
//
// Contract: the in-process equivalents of the set-up steps of the stock
// tools, so that code run here sees exactly what it would see inside
// `opt-19 -passes=...` and `llc-19 -filetype=obj` with default flags:
//  - parseModule: bitcode or textual IR into a context, verified unless the
//    caller already did (opt refuses broken input); failures throw
//    ModuleError "<name>: <LLVM's message>";
//  - createOptTargetMachine: opt's target machine (codegen flag defaults,
//    CodeGenOptLevel::None, the relocation model given as opt's
//    -relocation-model), null when the triple has no architecture;
//  - createCodeGenTargetMachine: llc's (codegen flag defaults, -O<level>,
//    explicit or default relocation model, the module's code model); with
//    LinkTime, as lld's LTO backends set it up on top (function and data
//    sections, the address-significance table);
//  - PassSetup: opt's new-pass-manager set-up (default AA pipeline, the
//    triple's TargetLibraryInfo, StandardInstrumentations so optnone and
//    opt-bisect behave as in opt, PipelineTuningOptions defaults). With
//    tuning options from the caller, "default<Ox>" is built as clang builds
//    it (buildPerModuleDefaultPipeline with those options) instead of
//    opt's parser, which resets the vectorizers for the level;
//  - DiagnosticCollector: a context diagnostic handler that records errors
//    and warnings instead of printing them or exiting.
// Targets are registered once per process (initializeTargets); global LLVM
// options are guarded by llvmOptionLock.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_TOOLSETUP_H
#define MLOPT_LLVM_TOOLSETUP_H

#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/IR/DiagnosticHandler.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Target/TargetMachine.h"

#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace mlopt {

void initializeTargets();

/// Guards LLVM's global options: compiles hold it shared; a call that must
/// flip a global option for itself holds it exclusively.
std::shared_mutex &llvmOptionLock();

std::unique_ptr<llvm::Module> parseModule(llvm::LLVMContext &Ctx, const std::string &Bytes,
                                          const std::string &Name, bool Verify = true);

std::unique_ptr<llvm::TargetMachine> createOptTargetMachine(llvm::Module &M,
                                                            const std::string &RelocModel = "");

std::unique_ptr<llvm::TargetMachine> createCodeGenTargetMachine(llvm::Module &M, int Level,
                                                                const std::string &RelocModel,
                                                                bool LinkTime = false);

class DiagnosticCollector final : public llvm::DiagnosticHandler {
public:
  bool handleDiagnostics(const llvm::DiagnosticInfo &DI) override;
  std::vector<std::string> Errors;
  std::vector<std::string> Warnings;
};

/// Installs a DiagnosticCollector on Ctx and returns it (owned by Ctx).
DiagnosticCollector &collectDiagnostics(llvm::LLVMContext &Ctx);

class PassSetup {
public:
  /// RegisterModuleAnalyses runs before the standard module analyses are
  /// registered (so its registrations win, as a plugin's do in opt).
  PassSetup(llvm::Module &M, llvm::TargetMachine *TM,
            const std::function<void(llvm::ModuleAnalysisManager &)> &RegisterModuleAnalyses = {},
            const std::optional<llvm::PipelineTuningOptions> &Tuning = std::nullopt);
  ~PassSetup();

  llvm::PassBuilder &builder() { return PB; }
  llvm::ModuleAnalysisManager &MAM() { return MAMs; }
  llvm::FunctionAnalysisManager &FAM() { return FAMs; }
  /// Callbacks registered here see the passes run().
  llvm::PassInstrumentationCallbacks &instrumentation() { return PIC; }
  /// Parses Pipeline (opt's -passes syntax) and runs it followed by the
  /// verifier, as opt does; an unparsable pipeline throws CompileError.
  void run(llvm::Module &M, const std::string &Pipeline);

private:
  llvm::TargetLibraryInfoImpl TLII;
  llvm::LoopAnalysisManager LAMs;
  llvm::FunctionAnalysisManager FAMs;
  llvm::CGSCCAnalysisManager CGAMs;
  llvm::ModuleAnalysisManager MAMs;
  llvm::PassInstrumentationCallbacks PIC;
  llvm::StandardInstrumentations SI;
  bool HasTuning;
  llvm::PassBuilder PB;
};

} // namespace mlopt

#endif
