//===- TrainingLogParser.h - Incremental MLGO log parser --------*- C++ -*-===//
//
// Contract: parses the MLGO training-log / interactive-stream format (header
// line, context, observation and outcome records, raw tensor payloads) from
// bytes that arrive in pieces. parse() consumes only whole records and
// reports each to a LogRecordSink; it returns how many bytes it consumed and
// leaves the rest for the next call, so it works on pipes as well as files.
// An observation is reported once it is complete: its payload and '\n', and,
// when the header has a score, its outcome record. Tensor lengths come from
// the header, never from newlines, so payload bytes equal to 0x0a are fine.
// Zero-observation contexts, consecutive context records and revisited
// context names are legal. Malformed bytes throw LogFormatError with the
// absolute byte offset of the problem and the reason; bytes that are merely
// incomplete are left unconsumed, and finish() explains (by throwing) why an
// incomplete tail cannot be a whole record.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TRAININGLOGPARSER_H
#define MLOPT_CORE_TRAININGLOGPARSER_H

#include "TensorSpec.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlopt {

class LogFormatError : public std::runtime_error {
public:
  LogFormatError(uint64_t Offset, std::string Reason)
      : std::runtime_error("byte " + std::to_string(Offset) + ": " + Reason), Offset(Offset),
        Reason(std::move(Reason)) {}
  uint64_t offset() const { return Offset; }
  const std::string &reason() const { return Reason; }

private:
  uint64_t Offset;
  std::string Reason;
};

struct LogHeader {
  std::vector<TensorSpec> Features;
  std::optional<TensorSpec> Score;
  std::optional<TensorSpec> Advice;
  /// Byte offset of each feature inside an observation payload.
  std::vector<size_t> FeatureOffsets;
  /// Bytes of all features of one observation.
  size_t PayloadBytes = 0;
  /// Length of the header line including its '\n'.
  size_t HeaderBytes = 0;
  /// Fewest bytes one observation (with its outcome, if scored) can take.
  size_t minRecordBytes() const;
};

class LogRecordSink {
public:
  virtual ~LogRecordSink() = default;
  virtual void onHeader(const LogHeader &Header) = 0;
  /// ContextIndex indexes the parser's contexts() (first-seen order).
  virtual void onContext(size_t ContextIndex) = 0;
  /// Payload holds header.PayloadBytes bytes; Score holds the score tensor
  /// bytes, or is null when the header has no score.
  virtual void onObservation(size_t ContextIndex, int64_t ObservationId, const char *Payload,
                             const char *Score) = 0;
};

class TrainingLogParser {
public:
  /// Longest accepted JSON record line (header and context names included).
  static constexpr size_t MaxLineBytes = size_t(64) << 20;

  /// Parses whole records from Data (which starts at offset()). Returns the
  /// number of bytes consumed; the caller passes the rest again, followed by
  /// more bytes.
  size_t parse(const char *Data, size_t Size, LogRecordSink &Sink);
  /// Call at end of input with the unconsumed tail (Size > 0): throws
  /// LogFormatError describing why the tail is not a whole record.
  [[noreturn]] void finish(const char *Data, size_t Size);

  uint64_t offset() const { return Offset; }
  bool hasHeader() const { return Header.has_value(); }
  const LogHeader &header() const { return *Header; }
  const std::vector<std::string> &contexts() const { return Contexts; }
  /// Number of observations reported so far.
  uint64_t observationCount() const { return Observations; }

private:
  /// Tries one record at P; returns its length, or 0 if incomplete.
  size_t parseRecord(const char *P, size_t Avail, LogRecordSink &Sink);
  size_t parseHeader(const char *P, size_t Avail, LogRecordSink &Sink);
  size_t parseObservation(const char *P, size_t Avail, size_t LineLen, int64_t Id,
                          LogRecordSink &Sink);
  /// Parses a non-fast-path record line [P, P+Len) (without '\n').
  json::Value parseLine(const char *P, size_t Len, uint64_t At) const;
  [[noreturn]] void fail(uint64_t At, const std::string &Reason) const;
  std::string where(int64_t Id) const;
  void diagnoseTail(const char *P, size_t Avail);

  std::optional<LogHeader> Header;
  std::vector<std::string> Contexts;
  std::unordered_map<std::string, size_t> ContextIndex;
  long CurrentContext = -1;
  uint64_t Offset = 0;
  uint64_t Observations = 0;
};

} // namespace mlopt

#endif
