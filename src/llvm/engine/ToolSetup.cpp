#include "ToolSetup.h"
#include "InProcessCompiler.h"

#include "LLVMVersion.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Analysis/AliasAnalysis.h"
#include "llvm/CodeGen/CommandFlags.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/Verifier.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <mutex>

using namespace llvm;

// The codegen command-line flags opt and llc register; their defaults are
// what InitTargetOptionsFromCodeGenFlags and setFunctionAttributes read.
static codegen::RegisterCodeGenFlags CodeGenFlags;

namespace mlopt {

void initializeTargets() {
  static std::once_flag Once;
  std::call_once(Once, [] {
    InitializeAllTargetInfos();
    InitializeAllTargets();
    InitializeAllTargetMCs();
    InitializeAllAsmPrinters();
    InitializeAllAsmParsers();
    InitializeAllDisassemblers(); // FunctionCodeReuse reads the objects' branches
  });
}

std::shared_mutex &llvmOptionLock() {
  static std::shared_mutex Lock;
  return Lock;
}

std::unique_ptr<Module> parseModule(LLVMContext &Ctx, const std::string &Bytes,
                                    const std::string &Name, bool Verify) {
  SMDiagnostic Err;
  std::unique_ptr<Module> M = parseIR(MemoryBufferRef(StringRef(Bytes), Name), Err, Ctx);
  if (!M) {
    std::string Text;
    raw_string_ostream OS(Text);
    if (Err.getLineNo() > 0)
      OS << Name << ":" << Err.getLineNo() << ":" << (Err.getColumnNo() + 1) << ": "
         << Err.getMessage();
    else
      OS << Name << ": " << Err.getMessage();
    throw ModuleError(OS.str());
  }
  std::string Problems;
  raw_string_ostream VOS(Problems);
  if (Verify && verifyModule(*M, &VOS)) {
    std::string First = StringRef(VOS.str()).split('\n').first.str();
    throw ModuleError(Name + ": input module is broken: " + First);
  }
  return M;
}

static std::optional<Reloc::Model> parseRelocModel(const std::string &Name);

std::unique_ptr<TargetMachine> createOptTargetMachine(Module &M, const std::string &RelocModel) {
  Triple T(M.getTargetTriple());
  if (!T.getArch())
    return nullptr;
  std::string Error;
  const Target *TheTarget = TargetRegistry::lookupTarget(codegen::getMArch(), T, Error);
  if (!TheTarget)
    throw CompileError(M.getModuleIdentifier() + ": no target machine for '" + T.str() +
                       "': " + Error);
  // As opt's codegen::createTargetMachineForTriple, with the relocation
  // model given here (opt's -relocation-model): passes such as
  // rel-lookup-table-converter read it.
  std::optional<Reloc::Model> Reloc =
      RelocModel.empty() ? codegen::getExplicitRelocModel() : parseRelocModel(RelocModel);
  std::unique_ptr<TargetMachine> TM(TheTarget->createTargetMachine(
      targetTripleArg(T), codegen::getCPUStr(), codegen::getFeaturesStr(),
      codegen::InitTargetOptionsFromCodeGenFlags(T), Reloc, codegen::getExplicitCodeModel(),
      CodeGenOptLevel::None));
  if (!TM)
    throw CompileError(M.getModuleIdentifier() + ": no target machine for '" + T.str() + "'");
  codegen::setFunctionAttributes(codegen::getCPUStr(), codegen::getFeaturesStr(), M);
  return TM;
}

static std::optional<Reloc::Model> parseRelocModel(const std::string &Name) {
  if (Name.empty())
    return std::nullopt;
  if (Name == "static")
    return Reloc::Static;
  if (Name == "pic")
    return Reloc::PIC_;
  if (Name == "dynamic-no-pic")
    return Reloc::DynamicNoPIC;
  if (Name == "ropi")
    return Reloc::ROPI;
  if (Name == "rwpi")
    return Reloc::RWPI;
  if (Name == "ropi-rwpi")
    return Reloc::ROPI_RWPI;
  throw CompileError("unknown relocation model '" + Name +
                     "' (static, pic, dynamic-no-pic, ropi, rwpi, ropi-rwpi)");
}

std::unique_ptr<TargetMachine>
createCodeGenTargetMachine(Module &M, int Level, const std::string &RelocModel, bool LinkTime) {
  Triple T(M.getTargetTriple());
  if (T.getTriple().empty())
    T.setTriple(sys::getDefaultTargetTriple());
  std::string Error;
  const Target *TheTarget = TargetRegistry::lookupTarget(codegen::getMArch(), T, Error);
  if (!TheTarget)
    throw CompileError(M.getModuleIdentifier() + ": " + Error);
  std::optional<CodeGenOptLevel> OptLevel = CodeGenOpt::getLevel(Level);
  if (!OptLevel)
    throw CompileError("codegen level must be 0-3, not " + std::to_string(Level));
  TargetOptions Options = codegen::InitTargetOptionsFromCodeGenFlags(T);
  if (LinkTime) { // lld's LTO configuration, always
    Options.FunctionSections = true;
    Options.DataSections = true;
    Options.EmitAddrsig = true;
  }
  std::unique_ptr<TargetMachine> TM(TheTarget->createTargetMachine(
      targetTripleArg(T), codegen::getCPUStr(), codegen::getFeaturesStr(), Options,
      parseRelocModel(RelocModel), codegen::getExplicitCodeModel(), *OptLevel));
  if (!TM)
    throw CompileError(M.getModuleIdentifier() + ": no target machine for '" + T.str() + "'");
  if (std::optional<CodeModel::Model> CM = M.getCodeModel())
    TM->setCodeModel(*CM);
  codegen::setFunctionAttributes(codegen::getCPUStr(), codegen::getFeaturesStr(), M);
  return TM;
}

bool DiagnosticCollector::handleDiagnostics(const DiagnosticInfo &DI) {
  DiagnosticSeverity Severity = DI.getSeverity();
  if (Severity != DS_Error && Severity != DS_Warning)
    return true; // remarks and notes: dropped, as opt does without -pass-remarks
  std::string Text;
  raw_string_ostream OS(Text);
  DiagnosticPrinterRawOStream DP(OS);
  DI.print(DP);
  (Severity == DS_Error ? Errors : Warnings).push_back(OS.str());
  return true;
}

DiagnosticCollector &collectDiagnostics(LLVMContext &Ctx) {
  auto Handler = std::make_unique<DiagnosticCollector>();
  DiagnosticCollector &Ref = *Handler;
  Ctx.setDiagnosticHandler(std::move(Handler));
  return Ref;
}

PassSetup::PassSetup(Module &M, TargetMachine *TM,
                     const std::function<void(ModuleAnalysisManager &)> &RegisterModuleAnalyses,
                     const std::optional<PipelineTuningOptions> &Tuning)
    : TLII(Triple(M.getTargetTriple())),
      SI(M.getContext(), /*DebugLogging=*/false, /*VerifyEach=*/false),
      HasTuning(Tuning.has_value()),
      PB(TM, Tuning.value_or(PipelineTuningOptions()), std::nullopt, &PIC) {
  SI.registerCallbacks(PIC, &MAMs);
  AAManager AA;
  if (Error E = PB.parseAAPipeline(AA, "default"))
    throw CompileError("default AA pipeline: " + toString(std::move(E)));
  FAMs.registerPass([&] { return std::move(AA); });
  FAMs.registerPass([&] { return TargetLibraryAnalysis(TLII); });
  if (RegisterModuleAnalyses)
    RegisterModuleAnalyses(MAMs);
  PB.registerModuleAnalyses(MAMs);
  PB.registerCGSCCAnalyses(CGAMs);
  PB.registerFunctionAnalyses(FAMs);
  PB.registerLoopAnalyses(LAMs);
  PB.crossRegisterProxies(LAMs, FAMs, CGAMs, MAMs);
}

PassSetup::~PassSetup() {
  // Results may refer to each other across levels; clear outermost first.
  MAMs.clear();
  CGAMs.clear();
  FAMs.clear();
  LAMs.clear();
}

static std::optional<OptimizationLevel> defaultPipelineLevel(StringRef Pipeline) {
  if (!Pipeline.consume_front("default<") || !Pipeline.consume_back(">"))
    return std::nullopt;
  return StringSwitch<std::optional<OptimizationLevel>>(Pipeline)
      .Case("O0", OptimizationLevel::O0)
      .Case("O1", OptimizationLevel::O1)
      .Case("O2", OptimizationLevel::O2)
      .Case("O3", OptimizationLevel::O3)
      .Case("Os", OptimizationLevel::Os)
      .Case("Oz", OptimizationLevel::Oz)
      .Default(std::nullopt);
}

void PassSetup::run(Module &M, const std::string &Pipeline) {
  ModulePassManager MPM;
  // The textual "default<Ox>" resets the vectorizer options to opt's choice
  // for the level; with the caller's tuning, build the pipeline the way clang
  // does instead.
  std::optional<OptimizationLevel> Level =
      HasTuning ? defaultPipelineLevel(Pipeline) : std::nullopt;
  if (Level)
    MPM = *Level == OptimizationLevel::O0 ? PB.buildO0DefaultPipeline(*Level)
                                          : PB.buildPerModuleDefaultPipeline(*Level);
  else if (Error E = PB.parsePassPipeline(MPM, Pipeline))
    throw CompileError("invalid pipeline '" + Pipeline + "': " + toString(std::move(E)));
  MPM.addPass(VerifierPass());
  MPM.run(M, MAMs);
}

} // namespace mlopt
