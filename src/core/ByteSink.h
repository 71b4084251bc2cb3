//===- ByteSink.h - Where a training log's bytes go -------------*- C++ -*-===//
//
// Contract: an append-only byte destination. write() either stores all bytes
// or throws FileError (errno and path); flush() pushes buffered bytes to the
// OS. Sinks own what they open and close it when destroyed (after a
// best-effort flush).
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_CORE_BYTESINK_H
#define MLOPT_CORE_BYTESINK_H

#include <cstddef>
#include <memory>
#include <string>
#include <system_error>

namespace mlopt {

/// An OS error on a named file.
class FileError : public std::system_error {
public:
  FileError(int Errno, const std::string &What, std::string Path)
      : std::system_error(Errno, std::generic_category(), What), Path(std::move(Path)) {}
  const std::string &path() const { return Path; }

private:
  std::string Path;
};

class ByteSink {
public:
  virtual ~ByteSink() = default;
  virtual void write(const char *Data, size_t Size) = 0;
  virtual void flush() {}
  /// The output cannot be completed: drop what is buffered and make what
  /// was written not look like a finished output (a file the sink created is
  /// removed). Never throws; later writes and flushes do nothing.
  virtual void discard() noexcept {}
};

/// Accumulates everything in memory.
class StringSink final : public ByteSink {
public:
  void write(const char *Data, size_t Size) override { Buffer.append(Data, Size); }
  const std::string &str() const { return Buffer; }
  std::string take() { return std::move(Buffer); }

private:
  std::string Buffer;
};

/// Buffered writes to a file descriptor (a file, a pipe or a FIFO).
class FdSink final : public ByteSink {
public:
  /// Takes ownership of Fd when OwnsFd. Path is only used in messages.
  FdSink(int Fd, bool OwnsFd, std::string Path);
  ~FdSink() override;
  void write(const char *Data, size_t Size) override;
  void flush() override;
  void discard() noexcept override;

  /// Creates Path for writing; refuses to replace an existing regular file unless
  /// Overwrite (a FIFO or device that exists is opened for writing). Throws
  /// FileError.
  static std::unique_ptr<FdSink> create(const std::string &Path, bool Overwrite);

private:
  void writeAll(const char *Data, size_t Size);
  int Fd;
  bool OwnsFd;
  bool Discarded = false;
  std::string Path;
  std::string Buffer;
};

} // namespace mlopt

#endif
