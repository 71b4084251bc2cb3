#include "EvictionChannel.h"

#include "ByteSink.h"

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace mlopt {

namespace {

[[noreturn]] void fail(const std::string &What, const std::string &Path) {
  throw FileError(errno, What + " " + Path, Path);
}

class AnswerSink final : public LogRecordSink {
public:
  AnswerSink(const EvictionChannel::Answer &Decide, const EvictionChannel::HeaderCallback &OnHeader,
             int Fd)
      : Decide(Decide), OnHeader(OnHeader), Fd(Fd) {}
  void onHeader(const LogHeader &H) override {
    Header = &H;
    if (OnHeader)
      OnHeader(H);
  }
  void onContext(size_t) override {}
  void onObservation(size_t, int64_t, const char *Payload, const char *) override {
    int64_t Index = EvictionChannel::FallbackIndex;
    try {
      Index = Decide(*Header, Payload);
    } catch (...) {
    }
    const char *P = reinterpret_cast<const char *>(&Index);
    size_t Left = sizeof(Index);
    while (Left > 0) {
      ssize_t N = ::write(Fd, P, Left);
      if (N < 0 && errno == EINTR)
        continue;
      if (N <= 0)
        return;
      P += N;
      Left -= size_t(N);
    }
  }

private:
  const EvictionChannel::Answer &Decide;
  const EvictionChannel::HeaderCallback &OnHeader;
  int Fd;
  const LogHeader *Header = nullptr;
};

} // namespace

EvictionChannel::EvictionChannel(Answer A, HeaderCallback H)
    : Decide(std::move(A)), OnHeader(std::move(H)) {
  const char *Tmp = std::getenv("TMPDIR");
  std::string Template = std::string(Tmp && *Tmp ? Tmp : "/tmp") + "/mlopt-evict-XXXXXX";
  std::vector<char> Buf(Template.begin(), Template.end());
  Buf.push_back('\0');
  if (!::mkdtemp(Buf.data()))
    fail("cannot create a directory for the eviction channel:", Template);
  Dir = Buf.data();
  Base = Dir + "/channel";
  for (const char *Suffix : {".in", ".out"})
    if (::mkfifo((Base + Suffix).c_str(), 0600) != 0) {
      int E = errno;
      unlink();
      errno = E;
      fail("cannot create the eviction channel", Base + Suffix);
    }
  // Read-write opens of a FIFO do not wait for the other side (Linux).
  ToLLVM = ::open((Base + ".in").c_str(), O_RDWR | O_CLOEXEC);
  FromLLVM = ::open((Base + ".out").c_str(), O_RDWR | O_CLOEXEC);
  if (ToLLVM < 0 || FromLLVM < 0 || ::pipe2(StopPipe, O_CLOEXEC) != 0) {
    int E = errno;
    for (int Fd : {ToLLVM, FromLLVM, StopPipe[0], StopPipe[1]})
      if (Fd >= 0)
        ::close(Fd);
    unlink();
    errno = E;
    fail("cannot open the eviction channel", Base);
  }
  Server = std::thread([this] { serve(); });
}

EvictionChannel::~EvictionChannel() {
  char Stop = 1;
  while (::write(StopPipe[1], &Stop, 1) < 0 && errno == EINTR) {
  }
  Server.join();
  for (int Fd : {ToLLVM, FromLLVM, StopPipe[0], StopPipe[1]})
    ::close(Fd);
  unlink();
}

void EvictionChannel::unlink() {
  if (Dir.empty())
    return;
  ::unlink((Base + ".in").c_str());
  ::unlink((Base + ".out").c_str());
  ::rmdir(Dir.c_str());
  Dir.clear();
}

std::string EvictionChannel::error() const {
  std::lock_guard<std::mutex> Lock(ErrorMutex);
  return Error;
}

void EvictionChannel::serve() {
  TrainingLogParser Parser;
  AnswerSink Sink(Decide, OnHeader, ToLLVM);
  std::vector<char> Pending;
  std::vector<char> Chunk(1 << 16);
  pollfd Fds[2] = {{FromLLVM, POLLIN, 0}, {StopPipe[0], POLLIN, 0}};
  for (;;) {
    // Data LLVM wrote comes first: the stop request only follows once
    // LLVM's runner is gone and every question was answered.
    if (::poll(Fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    if (!(Fds[0].revents & POLLIN)) {
      if (Fds[1].revents)
        break;
      continue;
    }
    ssize_t N = ::read(FromLLVM, Chunk.data(), Chunk.size());
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      break;
    Pending.insert(Pending.end(), Chunk.data(), Chunk.data() + N);
    try {
      size_t Used = Parser.parse(Pending.data(), Pending.size(), Sink);
      Pending.erase(Pending.begin(), Pending.begin() + long(Used));
    } catch (const std::exception &E) {
      std::lock_guard<std::mutex> Lock(ErrorMutex);
      Error = std::string("eviction channel: ") + E.what();
      break;
    }
  }
}

} // namespace mlopt
