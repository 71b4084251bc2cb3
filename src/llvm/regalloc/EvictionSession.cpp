#include "EvictionSession.h"

#include <chrono>
#include <cstring>

namespace mlopt {

namespace {
enum WarningKind { OutOfRange, Masked, NotIntegral, DeciderFailed, PingPong };
const TensorSpec IndexSpec("index_to_evict", TensorType::Int64, {1});
const TensorSpec RewardSpec("reward", TensorType::Float, {1});
} // namespace

EvictionSession::EvictionSession(EvictionSessionOptions Options)
    : Decider(std::move(Options.Decider)), LogSink(std::move(Options.LogSink)),
      SinkView(LogSink.get()), MaxEvictionsPerVReg(Options.MaxEvictionsPerVReg),
      ScoreFunctions(Options.Score) {}

EvictionSession::~EvictionSession() {
  try {
    finish();
  } catch (...) {
  }
}

void EvictionSession::onHeader(const LogHeader &Header) {
  std::lock_guard<std::mutex> Lock(Mutex);
  LLVMFeatures = Header.Features;
  HaveHeader = true;
  HeaderSeen.notify_all();
}

bool EvictionSession::awaitHeader(double Seconds) {
  std::unique_lock<std::mutex> Lock(Mutex);
  return HeaderSeen.wait_for(Lock, std::chrono::duration<double>(Seconds),
                             [this] { return HaveHeader; });
}

void EvictionSession::startLogLocked() {
  if (Log || !LogSink || !HaveHeader || Finished)
    return;
  std::vector<TensorSpec> Features = LLVMFeatures;
  Features.push_back(IndexSpec);
  try {
    Log = std::make_unique<TrainingLogWriter>(std::move(LogSink), std::move(Features), RewardSpec);
  } catch (const std::exception &E) {
    Errors.push_back(std::string("cannot write the regalloc training log: ") + E.what());
  }
}

void EvictionSession::beginFunction(const std::string &Name) {
  std::lock_guard<std::mutex> Lock(Mutex);
  Function = Name;
  ObservationOpen = false;
  startLogLocked();
  if (Log && !Log->failed()) {
    try {
      Log->switchContext(Name);
    } catch (const std::exception &E) {
      Errors.push_back(std::string("regalloc training log: ") + E.what());
    }
  }
}

void EvictionSession::beginDecision(int64_t Default, unsigned Evictions) {
  std::lock_guard<std::mutex> Lock(Mutex);
  DefaultIndex = Default;
  VRegEvictions = Evictions;
  Current = Outcome();
}

EvictionSession::Outcome EvictionSession::endDecision() {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (!Decider)
    Current.UseDefault = true; // LLVM's development mode without a model
  return Current;
}

void EvictionSession::warnOnce(int Kind, const std::string &Text) {
  if (Warned[Kind])
    return;
  Warned[Kind] = true;
  Warnings.push_back(Text + " (warned once; later cases are handled the same way)");
}

std::vector<std::string> EvictionSession::takeWarnings() {
  std::lock_guard<std::mutex> Lock(Mutex);
  std::vector<std::string> Out;
  Out.swap(Warnings);
  return Out;
}

std::vector<std::string> EvictionSession::takeErrors() {
  std::lock_guard<std::mutex> Lock(Mutex);
  std::vector<std::string> Out;
  Out.swap(Errors);
  return Out;
}

void EvictionSession::addError(const std::string &Text) {
  std::lock_guard<std::mutex> Lock(Mutex);
  Errors.push_back(Text);
}

int64_t EvictionSession::answer(const LogHeader &Header, const char *Payload) {
  std::lock_guard<std::mutex> Lock(Mutex);
  Current.Asked = true;
  ++Stats.Questions;
  const int64_t *Mask = nullptr;
  for (size_t I = 0; I < Header.Features.size(); ++I)
    if (Header.Features[I].name() == "mask" && Header.Features[I].elementCount() == Columns)
      Mask = reinterpret_cast<const int64_t *>(Payload + Header.FeatureOffsets[I]);
  auto Legal = [Mask](int64_t C) { return C >= 0 && C < Columns && (!Mask || Mask[C] != 0); };
  std::string Where = " in function '" + Function + "'";

  int64_t Chosen = DefaultIndex;
  bool UseDefault = true;
  if (Decider && VRegEvictions >= MaxEvictionsPerVReg) {
    warnOnce(PingPong, "mlopt: the regalloc policy made one virtual register evict " +
                           std::to_string(MaxEvictionsPerVReg) + " times" + Where +
                           "; the default advisor decides for it from now on");
  } else if (Decider) {
    std::string Raw;
    std::optional<int64_t> Index;
    try {
      Index = Decider->decide(EvictionQuestion{Header, Payload, DefaultIndex}, Raw);
    } catch (const std::exception &E) {
      warnOnce(DeciderFailed, std::string("mlopt: the regalloc policy failed") + Where + ": " +
                                  E.what() + "; the default advisor decides instead");
      Raw = "-";
    }
    if (!Index) {
      if (Raw != "-")
        warnOnce(NotIntegral, "mlopt: the regalloc policy answered " + Raw + Where +
                                  ", not a column index; the default advisor decides instead");
    } else if (*Index < 0 || *Index >= Columns) {
      warnOnce(OutOfRange, "mlopt: the regalloc policy answered column " + std::to_string(*Index) +
                               Where + " (columns are 0-32); the default advisor decides instead");
    } else if (!Legal(*Index)) {
      warnOnce(Masked, "mlopt: the regalloc policy chose column " + std::to_string(*Index) + Where +
                           ", whose mask is 0; the default advisor decides instead");
    } else {
      Chosen = *Index;
      UseDefault = false;
    }
  }
  Current.UseDefault = UseDefault;
  Current.PolicyEvicted = !UseDefault && Chosen != NoEviction;
  if (UseDefault && Decider)
    ++Stats.Replaced;
  if (Current.PolicyEvicted)
    ++Stats.PolicyEvictions;

  if (Log && !Log->failed() && !Finished) {
    try {
      if (ObservationOpen) {
        float Zero = 0.0f;
        Log->logReward(&Zero, sizeof(Zero));
      }
      Log->startObservation();
      for (size_t I = 0; I < Header.Features.size(); ++I)
        Log->logTensorValue(I, Payload + Header.FeatureOffsets[I], Header.Features[I].byteSize());
      Log->logTensorValue(Header.Features.size(), &Chosen, sizeof(Chosen));
      Log->endObservation();
      ObservationOpen = true;
    } catch (const std::exception &E) {
      Errors.push_back(std::string("regalloc training log: ") + E.what());
    }
  }
  // LLVM's advisor must get a legal column whatever we apply.
  if (Legal(Chosen))
    return Chosen;
  for (int64_t C = Columns - 1; C >= 0; --C)
    if (Legal(C))
      return C;
  return NoEviction;
}

void EvictionSession::functionScored(const FunctionScore &Score) {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (ScoreFunctions)
    Scores.push_back(Score);
  if (Log && !Log->failed() && !Finished && ObservationOpen && Score.Function == Function) {
    try {
      float Reward = static_cast<float>(Score.Score);
      Log->logReward(&Reward, sizeof(Reward));
    } catch (const std::exception &E) {
      Errors.push_back(std::string("regalloc training log: ") + E.what());
    }
    ObservationOpen = false;
  }
}

void EvictionSession::finish() {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (Finished)
    return;
  Finished = true;
  if (Log && !Log->failed())
    Log->flush();
}

} // namespace mlopt
