#include "InlinerPrefixSkip.h"

#include "llvm/ADT/Any.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace mlopt {

static constexpr StringLiteral InlinerPass = "ModuleInlinerWrapperPass";

/// See the header: no debug info, no coroutines.
static bool recordable(const Module &M) {
  if (M.getNamedMetadata("llvm.dbg.cu"))
    return false;
  for (const Function &F : M)
    if (F.getSubprogram() || F.getName().starts_with("llvm.coro."))
      return false;
  return true;
}

void InlinerPrefixSkip::registerCallbacks(PassInstrumentationCallbacks &PIC) {
  if (M == Mode::Resume) {
    PIC.registerShouldRunOptionalPassCallback([this](StringRef PassID, Any) {
      if (!Reached && PassID == InlinerPass)
        Reached = true;
      return Reached;
    });
    return;
  }
  PIC.registerBeforeNonSkippedPassCallback([this](StringRef PassID, Any IR) {
    if (Reached || PassID != InlinerPass)
      return;
    Reached = true;
    const Module *const *Unit = any_cast<const Module *>(&IR);
    if (!Unit || !recordable(**Unit))
      return;
    InlinerPrefix Prefix;
    raw_string_ostream OS(Prefix.Bitcode);
    WriteBitcodeToFile(**Unit, OS, /*ShouldPreserveUseListOrder=*/true);
    OS.flush();
    Prefix.Warnings = Warnings;
    Recorded = std::move(Prefix);
  });
}

} // namespace mlopt
