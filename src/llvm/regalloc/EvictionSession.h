//===- EvictionSession.h - mlopt's side of one eviction analysis -*- C++ -*-===//
//
// Contract: one EvictionSession serves one eviction-advisor analysis (an
// llc/clang process, or one in-process compile). Per decision the compiling
// thread calls beginDecision() with the default advisor's column, lets
// LLVM's ML advisor ask its question (answer() runs on the channel thread
// meanwhile), then endDecision() says whether the ML advisor asked and
// whether its answer must be replaced by the default advisor's choice.
//
// Every reply is validated: a column outside 0-32, a column whose mask is
// 0, a non-integral answer or a decider that throws gets the default
// advisor's choice and one warning per kind per session (takeWarnings());
// so does every decision about a virtual register the policy already made
// evict more than MaxEvictionsPerVReg times in the function (a ping-pong
// guard, as LLVM 20's -mlregalloc-max-eviction-count). LLVM's advisor is
// always sent a column whose mask is 1, so it never reads out of bounds.
//
// With a log sink, the session writes LLVM's development-mode eviction log:
// header = LLVM's 21 features + index_to_evict (int64 [1]), score reward
// (float [1]); a context per machine function; per decision the features and
// the column applied; outcome 0.0 for each observation followed by another in
// the same function, and the function's RegAllocScore (functionScored) for
// its last one. Without a decider the default advisor decides every
// question (and is logged), which makes the code identical to stock.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_EVICTIONSESSION_H
#define MLOPT_LLVM_EVICTIONSESSION_H

#include "ByteSink.h"
#include "EvictionDecider.h"
#include "TrainingLogWriter.h"

#include <array>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlopt {

struct EvictionSessionOptions {
  std::shared_ptr<EvictionDecider> Decider; // null: the default advisor decides
  std::unique_ptr<ByteSink> LogSink;        // null: no training log
  unsigned MaxEvictionsPerVReg = 100;
  /// Compute every function's RegAllocScore (also when there is no log).
  bool Score = false;
};

/// One function's RegAllocScore and its frequency-weighted instruction
/// counts (copies, loads, stores, load-stores, cheap and expensive remats).
struct FunctionScore {
  std::string Function;
  double Score = 0;
  std::array<double, 6> Counts{};
};

struct EvictionStats {
  uint64_t Questions = 0; // questions LLVM's ML advisor asked
  uint64_t Replaced = 0;  // replies replaced by the default advisor's choice
  uint64_t PolicyEvictions = 0;
};

class EvictionSession {
public:
  static constexpr int64_t Columns = 33;
  static constexpr int64_t NoEviction = 32;

  explicit EvictionSession(EvictionSessionOptions Options);
  ~EvictionSession();

  bool usesPolicy() const { return Decider != nullptr; }
  bool wantsLog() const { return SinkView != nullptr; }
  bool wantsScores() const { return ScoreFunctions || SinkView != nullptr; }

  // The compiling thread.
  void beginFunction(const std::string &Name);
  /// VRegEvictions: how many policy evictions the candidate already caused.
  void beginDecision(int64_t DefaultIndex, unsigned VRegEvictions);
  struct Outcome {
    bool Asked = false;      // LLVM's advisor consulted the channel
    bool UseDefault = false; // apply the default advisor's choice
    bool PolicyEvicted = false;
  };
  Outcome endDecision();
  void functionScored(const FunctionScore &Score);
  /// Warnings raised since the last call (each kind once per session).
  std::vector<std::string> takeWarnings();
  /// Errors (the log or policy could not be used) since the last call.
  std::vector<std::string> takeErrors();
  void addError(const std::string &Text);
  /// Waits (up to Seconds) until the channel delivered LLVM's header.
  bool awaitHeader(double Seconds);
  /// Flushes the log; later rewards and decisions are not logged.
  void finish();

  // The channel thread.
  void onHeader(const LogHeader &Header);
  int64_t answer(const LogHeader &Header, const char *Payload);

  const EvictionStats &stats() const { return Stats; }
  const std::vector<FunctionScore> &scores() const { return Scores; }
  /// The log's bytes for an in-memory sink (StringSink), after finish().
  ByteSink *logSink() const { return SinkView; }

private:
  void warnOnce(int Kind, const std::string &Text);
  void startLogLocked();

  std::shared_ptr<EvictionDecider> Decider;
  std::unique_ptr<ByteSink> LogSink; // until the log is created
  ByteSink *SinkView = nullptr;
  std::unique_ptr<TrainingLogWriter> Log;
  unsigned MaxEvictionsPerVReg;
  bool ScoreFunctions;

  mutable std::mutex Mutex;
  std::condition_variable HeaderSeen;
  bool HaveHeader = false;
  std::vector<TensorSpec> LLVMFeatures;
  std::string Function; // current machine function
  bool ContextLogged = false;
  bool ObservationOpen = false;
  // The decision in flight.
  int64_t DefaultIndex = NoEviction;
  unsigned VRegEvictions = 0;
  Outcome Current;
  bool Warned[5] = {};
  std::vector<std::string> Warnings;
  std::vector<std::string> Errors;
  EvictionStats Stats;
  std::vector<FunctionScore> Scores;
  bool Finished = false;
};

} // namespace mlopt

#endif
