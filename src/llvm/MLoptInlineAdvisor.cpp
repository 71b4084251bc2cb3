#include "MLoptInlineAdvisor.h"

#include <cstring>

using namespace llvm;

namespace mlopt {

static mlopt::TensorType typeOf(const llvm::TensorSpec &S) {
  switch (S.type()) {
  case llvm::TensorType::Float:
    return mlopt::TensorType::Float;
  case llvm::TensorType::Double:
    return mlopt::TensorType::Double;
  case llvm::TensorType::Int8:
    return mlopt::TensorType::Int8;
  case llvm::TensorType::UInt8:
    return mlopt::TensorType::UInt8;
  case llvm::TensorType::Int16:
    return mlopt::TensorType::Int16;
  case llvm::TensorType::UInt16:
    return mlopt::TensorType::UInt16;
  case llvm::TensorType::Int32:
    return mlopt::TensorType::Int32;
  case llvm::TensorType::UInt32:
    return mlopt::TensorType::UInt32;
  case llvm::TensorType::Int64:
    return mlopt::TensorType::Int64;
  case llvm::TensorType::UInt64:
    return mlopt::TensorType::UInt64;
  default:
    return mlopt::TensorType::Invalid;
  }
}

static mlopt::TensorSpec convert(const llvm::TensorSpec &S) {
  return mlopt::TensorSpec(S.name(), typeOf(S), S.shape(), S.port());
}

std::vector<mlopt::TensorSpec>
trainingLogFeatures(const InlinePolicyRunner &Runner) {
  std::vector<mlopt::TensorSpec> Specs;
  for (const llvm::TensorSpec &S : FeatureMap)
    Specs.push_back(convert(S));
  for (const llvm::TensorSpec &S : Runner.extraOutputs())
    Specs.push_back(convert(S));
  Specs.push_back(convert(DefaultDecisionSpec));
  Specs.push_back(convert(InlineDecisionSpec));
  return Specs;
}

namespace {
/// MLInlineAdvice that writes its observation once the inliner recorded it.
class LoggingAdvice final : public MLInlineAdvice {
public:
  LoggingAdvice(MLInlineAdvisor *Advisor, CallBase &CB,
                OptimizationRemarkEmitter &ORE, bool Recommendation,
                int64_t Default, std::string Row, TrainingLogWriter &Log)
      : MLInlineAdvice(Advisor, CB, ORE, Recommendation), Default(Default),
        Row(std::move(Row)), Log(Log) {}

  void recordInliningImpl() override {
    MLInlineAdvice::recordInliningImpl();
    log();
  }
  void recordInliningWithCalleeDeletedImpl() override {
    MLInlineAdvice::recordInliningWithCalleeDeletedImpl();
    log();
  }
  void recordUnsuccessfulInliningImpl(const InlineResult &Result) override {
    MLInlineAdvice::recordUnsuccessfulInliningImpl(Result);
    log();
  }
  void recordUnattemptedInliningImpl() override {
    MLInlineAdvice::recordUnattemptedInliningImpl();
    log();
  }

private:
  void log() {
    Log.startObservation();
    const std::vector<mlopt::TensorSpec> &Specs = Log.features();
    size_t At = 0, Index = 0;
    for (; Index + 2 < Specs.size(); ++Index) {
      Log.logTensorValue(Index, Row.data() + At, Specs[Index].byteSize());
      At += Specs[Index].byteSize();
    }
    int64_t Decision = isInliningRecommended() ? 1 : 0;
    Log.logTensorValue(Index++, &Default, sizeof(Default));
    Log.logTensorValue(Index, &Decision, sizeof(Decision));
    Log.endObservation();
  }
  int64_t Default;
  std::string Row; // features and extra outputs, as evaluated
  TrainingLogWriter &Log;
};
} // namespace

MLoptInlineAdvisor::MLoptInlineAdvisor(
    Module &M, ModuleAnalysisManager &MAM,
    std::unique_ptr<InlinePolicyRunner> RunnerIn,
    std::function<bool(CallBase &)> DefaultAdvice, TrainingLogWriter *Log)
    : MLInlineAdvisor(M, MAM, std::unique_ptr<MLModelRunner>(RunnerIn.release()),
                      std::move(DefaultAdvice)),
      Runner(static_cast<InlinePolicyRunner &>(*ModelRunner)), Log(Log) {}

MLoptInlineAdvisor::~MLoptInlineAdvisor() {
  if (Log)
    Log->flush();
}

std::unique_ptr<MLInlineAdvice>
MLoptInlineAdvisor::getAdviceFromModel(CallBase &CB,
                                       OptimizationRemarkEmitter &ORE) {
  bool Default = GetDefaultAdvice(CB);
  Runner.setDefaultDecision(Default);
  bool Decision = Runner.evaluate<int64_t>() != 0;
  if (!Log)
    return std::make_unique<MLInlineAdvice>(this, CB, ORE, Decision);
  std::string Row;
  for (size_t I = 0; I < FeatureMap.size(); ++I)
    Row.append(static_cast<const char *>(Runner.getTensorUntyped(I)),
               FeatureMap[I].getTotalTensorBufferSize());
  std::vector<llvm::TensorSpec> Extras = Runner.extraOutputs();
  for (size_t I = 0; I < Extras.size(); ++I)
    Row.append(static_cast<const char *>(Runner.extraOutputData(I)),
               Extras[I].getTotalTensorBufferSize());
  return std::make_unique<LoggingAdvice>(this, CB, ORE, Decision, Default,
                                         std::move(Row), *Log);
}

} // namespace mlopt
