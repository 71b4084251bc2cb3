#include "TraceableCodegen.h"

#include "Errors.h"
#include "LLVMOption.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"

#include <string>

using namespace llvm;

namespace mlopt {

namespace {
cl::Option *registered(const char *Name) {
  auto &Options = cl::getRegisteredOptions();
  auto It = Options.find(Name);
  if (It == Options.end())
    throw CompileError(std::string("traceable code generation: this libLLVM has no option -") +
                       Name);
  return It->second;
}
} // namespace

TraceableCodegenScope::TraceableCodegenScope() {
#if LLVM_VERSION_MAJOR != 19
  throw CompileError("traceable code generation (the trace reward) supports LLVM 19 only");
#else
  try {
    auto SetBool = [this](const char *Name, bool Value) {
      auto *Opt = static_cast<cl::opt<bool> *>(registered(Name));
      bool Old = *Opt;
      *Opt = Value;
      Restore.push_back([Opt, Old] { *Opt = Old; });
    };
    SetBool("basic-block-address-map", true);
    SetBool("disable-branch-fold", true);
    SetBool("tail-dup-placement", false);
    SetBool("disable-tail-duplicate", true);
    auto *TailMerge = static_cast<cl::opt<cl::boolOrDefault> *>(registered("enable-tail-merge"));
    cl::boolOrDefault OldTailMerge = *TailMerge;
    *TailMerge = cl::BOU_FALSE;
    Restore.push_back([TailMerge, OldTailMerge] { *TailMerge = OldTailMerge; });
    // A cl::bits: its occurrences add bits; setDefault() clears them all.
    cl::Option *Pgo = registered("pgo-analysis-map");
    Restore.push_back([Pgo] { Pgo->setDefault(); });
    if (Pgo->addOccurrence(0, "pgo-analysis-map", "br-prob"))
      throw CompileError("traceable code generation: LLVM refused -pgo-analysis-map=br-prob");
  } catch (...) {
    for (auto It = Restore.rbegin(); It != Restore.rend(); ++It)
      (*It)();
    throw;
  }
#endif
}

TraceableCodegenScope::~TraceableCodegenScope() {
  for (auto It = Restore.rbegin(); It != Restore.rend(); ++It)
    (*It)();
}

} // namespace mlopt
