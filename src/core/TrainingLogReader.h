//===- TrainingLogReader.h - A whole MLGO log as columns --------*- C++ -*-===//
//
// Contract: reads a training log (file or memory) into one contiguous column
// per feature ([rows, *shape], the header's element type), plus the score
// column when the header has one, the context index (int32) and the
// observation number (int64) of every row. Columns are malloc'ed buffers
// whose ownership can be released to the caller (who frees them with free()).
// Files are read in bounded chunks, so peak memory is the columns plus a few
// MiB. An empty input is an empty log without a header. Malformed input
// throws LogFormatError; an incomplete last record throws too, unless
// AllowTruncated, in which case it is dropped and reported in
// TruncatedBytes / TruncationReason.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_TRAININGLOGREADER_H
#define MLOPT_CORE_TRAININGLOGREADER_H

#include "ByteSink.h"
#include "TrainingLogParser.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace mlopt {

class ColumnarLog final : public LogRecordSink {
public:
  struct Column {
    char *Data = nullptr;
    size_t RowBytes = 0;
    size_t PayloadOffset = 0;
  };

  /// InputBytesHint (the input's size when known) sizes the columns up front.
  explicit ColumnarLog(uint64_t InputBytesHint = 0) : SizeHint(InputBytesHint) {}
  ~ColumnarLog() override;
  ColumnarLog(const ColumnarLog &) = delete;
  ColumnarLog &operator=(const ColumnarLog &) = delete;
  ColumnarLog(ColumnarLog &&O) noexcept;

  void onHeader(const LogHeader &H) override;
  void onContext(size_t) override {}
  void onObservation(size_t ContextIndex, int64_t Id, const char *Payload,
                     const char *Score) override {
    if (Rows == Capacity)
      grow(Capacity ? Capacity * 2 : std::max<size_t>(1, (size_t(1) << 20) / rowBytes()));
    for (Column &C : Features)
      copyCell(C.Data + Rows * C.RowBytes, Payload + C.PayloadOffset, C.RowBytes);
    if (Score)
      copyCell(ScoreColumn.Data + Rows * ScoreColumn.RowBytes, Score, ScoreColumn.RowBytes);
    reinterpret_cast<int32_t *>(ContextColumn.Data)[Rows] = int32_t(ContextIndex);
    reinterpret_cast<int64_t *>(IdColumn.Data)[Rows] = Id;
    ++Rows;
  }

  /// Shrinks the columns to the number of rows read.
  void shrinkToFit();

  bool HasHeader = false;
  LogHeader Header;
  std::vector<std::string> Contexts;
  std::vector<Column> Features;
  Column ScoreColumn;   // Data null when there is no score
  Column ContextColumn; // int32 per row
  Column IdColumn;      // int64 per row
  size_t Rows = 0;
  uint64_t InputBytes = 0;
  uint64_t TruncatedBytes = 0;
  std::string TruncationReason;

  /// Gives up ownership of a column's buffer (never null, even with 0 rows).
  static char *release(Column &C);

private:
  static inline void copyCell(char *Dst, const char *Src, size_t N) {
    switch (N) {
    case 8:
      memcpy(Dst, Src, 8);
      break;
    case 4:
      memcpy(Dst, Src, 4);
      break;
    case 2:
      memcpy(Dst, Src, 2);
      break;
    case 1:
      *Dst = *Src;
      break;
    default:
      memcpy(Dst, Src, N);
    }
  }
  void grow(size_t NewCapacity);
  /// Bytes of one row over all columns.
  size_t rowBytes();
  std::vector<Column *> allColumns();

  uint64_t SizeHint;
  size_t Capacity = 0;
};

/// Reads a whole log file. Throws LogFormatError (offsets are file offsets)
/// or FileError when the file cannot be read.
ColumnarLog readLogFile(const std::string &Path, bool AllowTruncated);
/// Reads a whole log held in memory.
ColumnarLog readLogBuffer(const char *Data, size_t Size, bool AllowTruncated);

} // namespace mlopt

#endif
