//===- TrainingLogWriter.h - Writes MLGO training logs ----------*- C++ -*-===//
//
// Contract: for every valid sequence of calls, the bytes written are identical
// to what llvm::Logger (LLVM 19, Analysis/Utils/TrainingLogger.h) writes for
// the same calls:
//   header   {"features":[specs],"score":spec,"advice":spec}\n  (score and
//            advice only when given), written by the constructor;
//   context  {"context":"<name>"}\n
//   start    {"observation":<n>}\n  with n counted per context name (a name
//            seen again continues its numbering);
//   tensors  raw host-order bytes of each feature, in header order;
//   end      \n
//   reward   {"outcome":<n>}\n<raw score bytes>\n  with n the current
//            observation number of the current context.
// Where llvm::Logger would silently write a corrupt log (a tensor out of
// order or of the wrong size, an observation without a context or left
// unfinished, a reward without a score spec or observation), this writer
// throws LogUsageError and writes nothing for that call.
// When the destination fails (a full disk: FileError), the writer discards
// it (ByteSink::discard: a file it created is removed, so an incomplete log
// never looks complete), rethrows, and is failed() from then on: every
// later call throws LogUsageError, flush() and close() do nothing.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TRAININGLOGWRITER_H
#define MLOPT_CORE_TRAININGLOGWRITER_H

#include "ByteSink.h"
#include "TensorSpec.h"

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlopt {

class LogUsageError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

class TrainingLogWriter {
public:
  TrainingLogWriter(std::unique_ptr<ByteSink> Sink, std::vector<TensorSpec> Features,
                    std::optional<TensorSpec> Score = std::nullopt,
                    std::optional<TensorSpec> Advice = std::nullopt);
  ~TrainingLogWriter();

  void switchContext(const std::string &Name);
  void startObservation();
  /// Data must hold exactly features()[FeatureIndex].byteSize() bytes, and
  /// FeatureIndex must be the next feature of the open observation.
  void logTensorValue(size_t FeatureIndex, const void *Data, size_t Size);
  void endObservation();
  /// Data must hold exactly score()->byteSize() bytes.
  void logReward(const void *Data, size_t Size);
  void flush() {
    if (!Closed && !Failed)
      guarded([&] { Sink->flush(); });
  }
  /// Flushes and releases the destination (closing a file it opened); any
  /// later call throws LogUsageError. In-memory sinks keep their bytes.
  void close();
  bool closed() const { return Closed; }
  /// The destination failed; the log was discarded.
  bool failed() const { return Failed; }

  /// Writes N whole observations from column buffers (Columns[i] holds N
  /// rows of feature i, contiguous) and, with a score spec, N outcomes from
  /// Scores (N rows). Same bytes as the equivalent sequence of single calls.
  void logObservations(size_t N, const std::vector<const char *> &Columns, const char *Scores);

  const std::vector<TensorSpec> &features() const { return Features; }
  const std::optional<TensorSpec> &score() const { return Score; }
  const std::optional<TensorSpec> &advice() const { return Advice; }
  const std::string &currentContext() const { return CurrentContext; }
  bool hasContext() const { return HasContext; }
  bool observationOpen() const { return NextFeature >= 0; }
  /// Number of observations started so far in context Name.
  size_t observationCount(const std::string &Name) const;
  /// The destination; null once closed (unless it is in memory).
  ByteSink *sink() { return Sink.get(); }

private:
  void write(const void *Data, size_t Size) {
    if (Closed)
      throw LogUsageError("the log writer is closed");
    if (Failed)
      throw LogUsageError("the log's destination failed earlier; the log was discarded");
    guarded([&] { Sink->write(static_cast<const char *>(Data), Size); });
  }
  template <typename Fn> void guarded(Fn &&F) {
    try {
      F();
    } catch (...) {
      Failed = true;
      Sink->discard();
      throw;
    }
  }
  void emit(const std::string &S) { write(S.data(), S.size()); }
  size_t nextObservationId();

  std::unique_ptr<ByteSink> Sink;
  std::vector<TensorSpec> Features;
  std::optional<TensorSpec> Score;
  std::optional<TensorSpec> Advice;
  std::map<std::string, size_t> ObservationIds; // last id used per context
  std::string CurrentContext;
  bool HasContext = false;
  long NextFeature = -1; // -1: no observation open
  bool LastObservationHasOutcome = true;
  bool Closed = false;
  bool Failed = false;
};

} // namespace mlopt

#endif
