#include "ByteSink.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace mlopt {

static constexpr size_t FlushThreshold = 1 << 20;

FdSink::FdSink(int Fd, bool OwnsFd, std::string Path)
    : Fd(Fd), OwnsFd(OwnsFd), Path(std::move(Path)) {}

FdSink::~FdSink() {
  try {
    flush();
  } catch (...) {
  }
  if (OwnsFd)
    ::close(Fd);
}

std::unique_ptr<FdSink> FdSink::create(const std::string &Path, bool Overwrite) {
  int Flags = O_WRONLY | O_CREAT | O_CLOEXEC | (Overwrite ? O_TRUNC : O_EXCL);
  int Fd = ::open(Path.c_str(), Flags, 0644);
  struct stat St;
  if (Fd < 0 && errno == EEXIST && ::stat(Path.c_str(), &St) == 0 && !S_ISREG(St.st_mode)) {
    // Not a file that could hold an earlier output: a FIFO, /dev/stdout...
    Fd = ::open(Path.c_str(), O_WRONLY | O_CLOEXEC);
  }
  if (Fd < 0)
    throw FileError(errno, "cannot create '" + Path + "'", Path);
  return std::make_unique<FdSink>(Fd, true, Path);
}

void FdSink::writeAll(const char *Data, size_t Size) {
  while (Size) {
    ssize_t N = ::write(Fd, Data, Size);
    if (N < 0) {
      if (errno == EINTR)
        continue;
      throw FileError(errno, "cannot write '" + Path + "'", Path);
    }
    Data += N;
    Size -= size_t(N);
  }
}

void FdSink::discard() noexcept {
  if (Discarded)
    return;
  Discarded = true;
  std::string().swap(Buffer);
  struct stat St;
  // Only a regular file this sink created is removed: never a device, a
  // pipe, or a descriptor the caller handed over.
  if (OwnsFd && ::fstat(Fd, &St) == 0 && S_ISREG(St.st_mode)) {
    (void)::ftruncate(Fd, 0);
    (void)::unlink(Path.c_str());
  }
}

void FdSink::write(const char *Data, size_t Size) {
  if (Discarded)
    return;
  if (Buffer.size() + Size > FlushThreshold) {
    flush();
    if (Size > FlushThreshold) {
      writeAll(Data, Size);
      return;
    }
  }
  Buffer.append(Data, Size);
}

void FdSink::flush() {
  if (Discarded || Buffer.empty())
    return;
  std::string Pending;
  Pending.swap(Buffer);
  writeAll(Pending.data(), Pending.size());
}

} // namespace mlopt
