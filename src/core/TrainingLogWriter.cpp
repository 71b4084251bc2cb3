#include "TrainingLogWriter.h"

namespace mlopt {

TrainingLogWriter::TrainingLogWriter(std::unique_ptr<ByteSink> SinkIn,
                                     std::vector<TensorSpec> FeaturesIn,
                                     std::optional<TensorSpec> ScoreIn,
                                     std::optional<TensorSpec> AdviceIn)
    : Sink(std::move(SinkIn)), Features(std::move(FeaturesIn)), Score(std::move(ScoreIn)),
      Advice(std::move(AdviceIn)) {
  std::string Header = "{\"features\":[";
  for (size_t I = 0; I < Features.size(); ++I) {
    if (I)
      Header += ',';
    Features[I].appendJSON(Header);
  }
  Header += ']';
  if (Score) {
    Header += ",\"score\":";
    Score->appendJSON(Header);
  }
  if (Advice) {
    Header += ",\"advice\":";
    Advice->appendJSON(Header);
  }
  Header += "}\n";
  emit(Header);
}

TrainingLogWriter::~TrainingLogWriter() = default;

void TrainingLogWriter::close() {
  if (Closed)
    return;
  if (!Failed)
    guarded([&] { Sink->flush(); });
  Closed = true;
  if (!dynamic_cast<StringSink *>(Sink.get()))
    Sink.reset();
}

size_t TrainingLogWriter::observationCount(const std::string &Name) const {
  auto It = ObservationIds.find(Name);
  return It == ObservationIds.end() ? 0 : It->second + 1;
}

void TrainingLogWriter::switchContext(const std::string &Name) {
  if (Closed)
    throw LogUsageError("the log writer is closed");
  if (observationOpen())
    throw LogUsageError("switch_context: observation " +
                        std::to_string(ObservationIds[CurrentContext]) +
                        " is still open (call end_observation first)");
  if (!LastObservationHasOutcome)
    throw LogUsageError("switch_context: the last observation has no reward "
                        "yet (the log has a score, so every observation needs "
                        "one)");
  std::string Line = "{\"context\":";
  json::appendQuoted(Line, Name);
  Line += "}\n";
  emit(Line);
  CurrentContext = Name;
  HasContext = true;
}

size_t TrainingLogWriter::nextObservationId() {
  auto [It, Inserted] = ObservationIds.emplace(CurrentContext, 0);
  if (!Inserted)
    ++It->second;
  return It->second;
}

void TrainingLogWriter::startObservation() {
  if (!HasContext)
    throw LogUsageError("start_observation: no context yet (call "
                        "switch_context first)");
  if (observationOpen())
    throw LogUsageError("start_observation: the previous observation is "
                        "still open");
  if (!LastObservationHasOutcome)
    throw LogUsageError("start_observation: the previous observation has no "
                        "reward yet (the log has a score, so every "
                        "observation needs one)");
  size_t Id = nextObservationId();
  emit("{\"observation\":" + std::to_string(Id) + "}\n");
  NextFeature = 0;
  LastObservationHasOutcome = !Score;
}

void TrainingLogWriter::logTensorValue(size_t FeatureIndex, const void *Data, size_t Size) {
  if (!observationOpen())
    throw LogUsageError("log_tensor: no observation is open");
  if (FeatureIndex >= Features.size())
    throw LogUsageError("log_tensor: feature index " + std::to_string(FeatureIndex) +
                        " out of range (" + std::to_string(Features.size()) + " features)");
  const TensorSpec &Spec = Features[FeatureIndex];
  if (long(FeatureIndex) != NextFeature)
    throw LogUsageError("log_tensor: feature '" + Spec.name() + "' (index " +
                        std::to_string(FeatureIndex) + ") logged out of order; expected feature '" +
                        Features[size_t(NextFeature)].name() + "' (index " +
                        std::to_string(NextFeature) + ")");
  if (Size != Spec.byteSize())
    throw LogUsageError("log_tensor: feature '" + Spec.name() + "' needs " +
                        std::to_string(Spec.byteSize()) + " bytes, got " + std::to_string(Size));
  write(Data, Size);
  ++NextFeature;
}

void TrainingLogWriter::endObservation() {
  if (!observationOpen())
    throw LogUsageError("end_observation: no observation is open");
  if (size_t(NextFeature) != Features.size())
    throw LogUsageError("end_observation: feature '" + Features[size_t(NextFeature)].name() +
                        "' was not logged");
  emit("\n");
  NextFeature = -1;
}

void TrainingLogWriter::logReward(const void *Data, size_t Size) {
  if (!Score)
    throw LogUsageError("log_reward: this log has no score spec");
  if (observationOpen())
    throw LogUsageError("log_reward: the observation is still open (call "
                        "end_observation first)");
  auto It = ObservationIds.find(CurrentContext);
  if (!HasContext || It == ObservationIds.end())
    throw LogUsageError("log_reward: no observation in the current context");
  if (LastObservationHasOutcome)
    throw LogUsageError("log_reward: observation " + std::to_string(It->second) +
                        " already has its reward");
  if (Size != Score->byteSize())
    throw LogUsageError("log_reward: score '" + Score->name() + "' needs " +
                        std::to_string(Score->byteSize()) + " bytes, got " + std::to_string(Size));
  emit("{\"outcome\":" + std::to_string(It->second) + "}\n");
  write(Data, Size);
  emit("\n");
  LastObservationHasOutcome = true;
}

void TrainingLogWriter::logObservations(size_t N, const std::vector<const char *> &Cols,
                                        const char *Scores) {
  if (Cols.size() != Features.size())
    throw LogUsageError("log_observations: got " + std::to_string(Cols.size()) + " columns for " +
                        std::to_string(Features.size()) + " features");
  if (bool(Score) != (Scores != nullptr))
    throw LogUsageError(Score ? "log_observations: this log has a score; "
                                "scores are required"
                              : "log_observations: this log has no score spec");
  for (size_t Row = 0; Row < N; ++Row) {
    startObservation();
    for (size_t F = 0; F < Features.size(); ++F) {
      size_t Size = Features[F].byteSize();
      write(Cols[F] + Row * Size, Size);
    }
    NextFeature = long(Features.size());
    endObservation();
    if (Score)
      logReward(Scores + Row * Score->byteSize(), Score->byteSize());
  }
}

} // namespace mlopt
