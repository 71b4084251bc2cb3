#include "LTOModuleSaver.h"
#include "LinkCommandLine.h"
#include "PassModule.h"
#include "PluginDiagnostic.h"
#include "TrainingLogPath.h"

#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassInstrumentation.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>

using namespace llvm;

namespace mlopt {

namespace {

void writeOrWarn(LLVMContext &Ctx, const std::string &Path,
                 const std::function<void(raw_ostream &)> &Write) {
  std::error_code EC;
  raw_fd_ostream OS(Path, EC, sys::fs::OF_None);
  if (!EC) {
    Write(OS);
    OS.close();
    EC = OS.error();
    OS.clear_error();
  }
  if (EC)
    Ctx.diagnose(PluginDiagnostic(DS_Warning, "mlopt: cannot save the LTO module to '" + Path +
                                                  "': " + EC.message()));
}

void saveModule(const Module &M, const std::string &Dir) {
  const LinkCommandLine &Link = linkCommandLine();
  bool Thin = !isMergedLTOModule(M);
  SmallString<256> Cwd, Output(Link.Output);
  if (sys::fs::current_path(Cwd))
    Cwd = ".";
  sys::fs::make_absolute(Output);
  std::string Name =
      linkTimeModuleName(std::string(Output), Thin, M.getSourceFileName(), M.getModuleIdentifier());
  std::string Base = Dir + (Dir.empty() || Dir.back() == '/' ? "" : "/") + Name;
  LLVMContext &Ctx = M.getContext();
  try {
    makeParentDirectory(Base);
  } catch (const std::exception &E) {
    Ctx.diagnose(PluginDiagnostic(DS_Warning,
                                  std::string("mlopt: cannot save the LTO module: ") + E.what()));
    return;
  }
  writeOrWarn(Ctx, Base + ".bc",
              [&](raw_ostream &OS) { WriteBitcodeToFile(M, OS, /*PreserveUseListOrder=*/true); });
  json::Object Facts{{"lto", Thin ? "thin" : "full"},
                     {"output", Link.Output},
                     {"output_path", std::string(Output)},
                     {"cwd", std::string(Cwd)},
                     {"module", M.getModuleIdentifier()},
                     // what %m names this module in the plugin's per-module paths
                     {"module_name", linkTimeModuleName(Link.Output, Thin, M.getSourceFileName(),
                                                        M.getModuleIdentifier())},
                     {"source", M.getSourceFileName()},
                     {"reloc_model", Link.Pic ? "pic" : "static"},
                     {"shared", Link.Shared},
                     {"lto_level", "O" + std::to_string(Link.LTOLevel)},
                     {"llvm", LLVM_VERSION_STRING}};
  writeOrWarn(Ctx, Base + ".link.json", [&](raw_ostream &OS) {
    OS << formatv("{0:2}", json::Value(std::move(Facts))) << "\n";
  });
}

} // namespace

void installLTOModuleSaver(PassBuilder &PB, const std::string &Dir) {
  PassInstrumentationCallbacks *PIC = PB.getPassInstrumentationCallbacks();
  if (!PIC || !linkCommandLine().Linker)
    return;
  auto Saved = std::make_shared<bool>(false); // once per pipeline (per backend)
  PIC->registerBeforeNonSkippedPassCallback([Saved, Dir](StringRef, Any IR) {
    if (*Saved)
      return;
    const Module *M = passModule(IR);
    if (!M)
      return;
    *Saved = true;
    saveModule(*M, Dir);
  });
}

} // namespace mlopt
