#include "FileBytes.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace mlopt {

std::string readFileBytes(const std::string &Path, size_t Limit) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0)
    throw FileError(errno, "cannot open '" + Path + "'", Path);
  std::string Bytes;
  char Chunk[1 << 16];
  for (;;) {
    ssize_t N = ::read(Fd, Chunk, sizeof Chunk);
    if (N < 0 && errno == EINTR)
      continue;
    if (N < 0 || Bytes.size() + size_t(N > 0 ? N : 0) > Limit) {
      int E = N < 0 ? errno : EFBIG;
      ::close(Fd);
      throw FileError(E, "cannot read '" + Path + "'", Path);
    }
    if (N == 0)
      break;
    Bytes.append(Chunk, size_t(N));
  }
  ::close(Fd);
  return Bytes;
}

} // namespace mlopt
