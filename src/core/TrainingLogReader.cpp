#include "TrainingLogReader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace mlopt {

ColumnarLog::~ColumnarLog() {
  for (Column *C : allColumns())
    free(C->Data);
}

ColumnarLog::ColumnarLog(ColumnarLog &&O) noexcept
    : HasHeader(O.HasHeader), Header(std::move(O.Header)), Contexts(std::move(O.Contexts)),
      Features(std::move(O.Features)), ScoreColumn(O.ScoreColumn), ContextColumn(O.ContextColumn),
      IdColumn(O.IdColumn), Rows(O.Rows), InputBytes(O.InputBytes),
      TruncatedBytes(O.TruncatedBytes), TruncationReason(std::move(O.TruncationReason)),
      SizeHint(O.SizeHint), Capacity(O.Capacity) {
  O.Features.clear();
  O.ScoreColumn = O.ContextColumn = O.IdColumn = Column();
  O.Rows = O.Capacity = 0;
}

std::vector<ColumnarLog::Column *> ColumnarLog::allColumns() {
  std::vector<Column *> All;
  for (Column &C : Features)
    All.push_back(&C);
  for (Column *C : {&ScoreColumn, &ContextColumn, &IdColumn})
    if (C->RowBytes)
      All.push_back(C);
  return All;
}

void ColumnarLog::onHeader(const LogHeader &H) {
  HasHeader = true;
  Header = H;
  for (size_t I = 0; I < H.Features.size(); ++I)
    Features.push_back({nullptr, H.Features[I].byteSize(), H.FeatureOffsets[I]});
  if (H.Score)
    ScoreColumn.RowBytes = H.Score->byteSize();
  ContextColumn.RowBytes = sizeof(int32_t);
  IdColumn.RowBytes = sizeof(int64_t);
  // Enough rows for the whole input when its size is known: pages that are
  // never written are never committed, and shrinkToFit() returns the rest.
  // Never more rows than the input can hold: a header announcing huge
  // tensors allocates nothing until a whole record of them has arrived.
  size_t Initial = std::max<size_t>(1, (size_t(1) << 20) / rowBytes());
  if (SizeHint > H.HeaderBytes)
    Initial = size_t((SizeHint - H.HeaderBytes) / H.minRecordBytes());
  grow(Initial);
}

size_t ColumnarLog::rowBytes() {
  size_t Bytes = 0;
  for (Column *C : allColumns())
    Bytes += C->RowBytes;
  return std::max<size_t>(Bytes, 1);
}

void ColumnarLog::grow(size_t NewCapacity) {
  for (Column *C : allColumns()) {
    size_t Bytes = std::max<size_t>(NewCapacity * C->RowBytes, 1);
    void *P = realloc(C->Data, Bytes);
    if (!P)
      throw std::bad_alloc();
    C->Data = static_cast<char *>(P);
  }
  Capacity = NewCapacity;
}

void ColumnarLog::shrinkToFit() {
  if (HasHeader && Rows < Capacity)
    grow(Rows);
}

char *ColumnarLog::release(Column &C) {
  char *P = C.Data;
  if (!P)
    P = static_cast<char *>(malloc(1));
  C.Data = nullptr;
  return P;
}

namespace {
/// Parses Data (whose tail is incomplete) at end of input.
void finishInput(TrainingLogParser &Parser, ColumnarLog &Log, const char *Data, size_t Size,
                 bool AllowTruncated) {
  if (Log.InputBytes == 0) {
    // A 0-byte "log" (a compiler that died before its first write) is not
    // an empty log: say so, or with AllowTruncated report it as dropped.
    if (!AllowTruncated)
      throw LogFormatError(0, "empty input: not an MLGO training log (0 bytes, no header)");
    Log.TruncationReason = "empty input (0 bytes, no header)";
    return;
  }
  if (!Size)
    return;
  if (!AllowTruncated)
    Parser.finish(Data, Size);
  try {
    Parser.finish(Data, Size);
  } catch (const LogFormatError &E) {
    Log.TruncatedBytes = Size;
    Log.TruncationReason = E.what();
  }
}
} // namespace

ColumnarLog readLogBuffer(const char *Data, size_t Size, bool AllowTruncated) {
  ColumnarLog Log(Size);
  Log.InputBytes = Size;
  TrainingLogParser Parser;
  size_t Used = Parser.parse(Data, Size, Log);
  finishInput(Parser, Log, Data + Used, Size - Used, AllowTruncated);
  Log.Contexts = Parser.contexts();
  Log.shrinkToFit();
  return Log;
}

namespace {
struct FileDescriptor {
  int Fd;
  ~FileDescriptor() { ::close(Fd); }
};
} // namespace

ColumnarLog readLogFile(const std::string &Path, bool AllowTruncated) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    throw FileError(errno, "cannot open '" + Path + "'", Path);
  FileDescriptor Guard{Fd};
  struct stat St;
  uint64_t SizeHint = 0;
  if (fstat(Fd, &St) == 0 && S_ISREG(St.st_mode))
    SizeHint = uint64_t(St.st_size);
#ifdef POSIX_FADV_SEQUENTIAL
  posix_fadvise(Fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  ColumnarLog Log(SizeHint);
  TrainingLogParser Parser;
  // Reads of up to 4 MiB; a smaller regular file is read whole into a
  // buffer of its size (a 4 MiB buffer per call made reading many small
  // logs slow). The buffer grows when a record outgrows it.
  constexpr size_t MaxChunk = size_t(4) << 20;
  const size_t Chunk =
      SizeHint
          ? std::clamp<size_t>(size_t(std::min<uint64_t>(SizeHint, MaxChunk)) + 1, 4096, MaxChunk)
          : MaxChunk;
  std::vector<char> Buffer(Chunk);
  size_t Have = 0; // unconsumed bytes at the start of Buffer
  uint64_t Total = 0;
  while (true) {
    if (Buffer.size() - Have < Chunk / 2)
      Buffer.resize(Buffer.size() * 2); // one record larger than the chunk
    ssize_t N = ::read(Fd, Buffer.data() + Have, Buffer.size() - Have);
    if (N < 0) {
      if (errno == EINTR)
        continue;
      throw FileError(errno, "cannot read '" + Path + "'", Path);
    }
    if (N == 0)
      break;
    Total += uint64_t(N);
    Have += size_t(N);
    size_t Used = Parser.parse(Buffer.data(), Have, Log);
    if (Used) {
      memmove(Buffer.data(), Buffer.data() + Used, Have - Used);
      Have -= Used;
    }
  }
  Log.InputBytes = Total;
  finishInput(Parser, Log, Buffer.data(), Have, AllowTruncated);
  Log.Contexts = Parser.contexts();
  Log.shrinkToFit();
  return Log;
}

} // namespace mlopt
