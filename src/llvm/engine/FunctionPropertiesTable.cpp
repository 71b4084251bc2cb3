#include "FunctionPropertiesTable.h"
#include "LLVMOption.h"
#include "LLVMVersion.h"
#include "ToolSetup.h"

#include "llvm/Analysis/FunctionPropertiesAnalysis.h"
#include "llvm/Support/CommandLine.h"

#include <mutex>

using namespace llvm;

namespace mlopt {

namespace {

using Field = int64_t FunctionPropertiesInfo::*;
struct FieldInfo {
  const char *Name;
  Field Member;
  bool Detailed;
};

#define FPI_FIELD(NAME, DETAILED) {#NAME, &FunctionPropertiesInfo::NAME, DETAILED}
const FieldInfo AllFields[] = {
    FPI_FIELD(BasicBlockCount, false),
    FPI_FIELD(BlocksReachedFromConditionalInstruction, false),
    FPI_FIELD(Uses, false),
    FPI_FIELD(DirectCallsToDefinedFunctions, false),
    FPI_FIELD(LoadInstCount, false),
    FPI_FIELD(StoreInstCount, false),
    FPI_FIELD(MaxLoopDepth, false),
    FPI_FIELD(TopLevelLoopCount, false),
    FPI_FIELD(TotalInstructionCount, false),
    FPI_FIELD(BasicBlocksWithSingleSuccessor, true),
    FPI_FIELD(BasicBlocksWithTwoSuccessors, true),
    FPI_FIELD(BasicBlocksWithMoreThanTwoSuccessors, true),
    FPI_FIELD(BasicBlocksWithSinglePredecessor, true),
    FPI_FIELD(BasicBlocksWithTwoPredecessors, true),
    FPI_FIELD(BasicBlocksWithMoreThanTwoPredecessors, true),
    FPI_FIELD(BigBasicBlocks, true),
    FPI_FIELD(MediumBasicBlocks, true),
    FPI_FIELD(SmallBasicBlocks, true),
    FPI_FIELD(CastInstructionCount, true),
    FPI_FIELD(FloatingPointInstructionCount, true),
    FPI_FIELD(IntegerInstructionCount, true),
    FPI_FIELD(ConstantIntOperandCount, true),
    FPI_FIELD(ConstantFPOperandCount, true),
    FPI_FIELD(ConstantOperandCount, true),
    FPI_FIELD(InstructionOperandCount, true),
    FPI_FIELD(BasicBlockOperandCount, true),
    FPI_FIELD(GlobalValueOperandCount, true),
    FPI_FIELD(InlineAsmOperandCount, true),
    FPI_FIELD(ArgumentOperandCount, true),
    FPI_FIELD(UnknownOperandCount, true),
    FPI_FIELD(CriticalEdgeCount, true),
    FPI_FIELD(ControlFlowEdgeCount, true),
    FPI_FIELD(UnconditionalBranchCount, true),
#if LLVM_VERSION_MAJOR >= 22
    FPI_FIELD(ConditionalBranchCount, true),
    FPI_FIELD(BranchInstructionCount, true),
    FPI_FIELD(BranchSuccessorCount, true),
    FPI_FIELD(SwitchInstructionCount, true),
    FPI_FIELD(SwitchSuccessorCount, true),
#endif
    FPI_FIELD(IntrinsicCount, true),
    FPI_FIELD(DirectCallCount, true),
    FPI_FIELD(IndirectCallCount, true),
    FPI_FIELD(CallReturnsIntegerCount, true),
    FPI_FIELD(CallReturnsFloatCount, true),
    FPI_FIELD(CallReturnsPointerCount, true),
    FPI_FIELD(CallReturnsVectorIntCount, true),
    FPI_FIELD(CallReturnsVectorFloatCount, true),
    FPI_FIELD(CallReturnsVectorPointerCount, true),
    FPI_FIELD(CallWithManyArgumentsCount, true),
    FPI_FIELD(CallWithPointerArgumentCount, true),
};
#undef FPI_FIELD

cl::opt<bool> &detailedOption() {
  cl::opt<bool> *Option = findLLVMOption<bool>("enable-detailed-function-properties");
  if (!Option)
    throw std::runtime_error("libLLVM has no -enable-detailed-function-properties option");
  return *Option;
}

/// Sets the option for the scope, exclusively (compiles hold the shared side).
struct DetailedScope {
  explicit DetailedScope(bool On) : Guard(llvmOptionLock()), Option(detailedOption()) {
    Saved = Option;
    Option = On;
  }
  ~DetailedScope() { Option = Saved; }
  std::unique_lock<std::shared_mutex> Guard;
  cl::opt<bool> &Option;
  bool Saved;
};

} // namespace

FunctionPropertiesTable functionProperties(const std::string &Bitcode, const std::string &Name,
                                           bool Detailed) {
  FunctionPropertiesTable Table;
  for (const FieldInfo &F : AllFields)
    if (Detailed || !F.Detailed)
      Table.Fields.push_back(F.Name);
  LLVMContext Ctx;
  collectDiagnostics(Ctx);
  // Verified when it was loaded (loadModule).
  std::unique_ptr<Module> M = parseModule(Ctx, Bitcode, Name, /*Verify=*/false);
  PassSetup Passes(*M, nullptr);
  DetailedScope Scope(Detailed);
  for (Function &F : *M) {
    if (F.isDeclaration())
      continue;
    FunctionPropertiesInfo FPI = FunctionPropertiesInfo::getFunctionPropertiesInfo(F, Passes.FAM());
    Table.Functions.push_back(F.getName().str());
    for (const FieldInfo &Info : AllFields)
      if (Detailed || !Info.Detailed)
        Table.Values.push_back(FPI.*Info.Member);
  }
  return Table;
}

} // namespace mlopt
