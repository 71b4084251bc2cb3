#include "InteractiveRunner.h"
#include "PluginDiagnostic.h"
#include "TensorSpecConversion.h"

#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/DiagnosticPrinter.h"
#include "llvm/IR/LLVMContext.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace llvm;

namespace mlopt {

namespace {
// The channels whose host failed: later runners on them finish with the
// heuristic at once. Per channel, since ThinLTO backends run in threads, each
// with its own channel (a base with %m).
std::mutex FailedLock;
std::set<std::string> FailedBases;

bool hostFailedOn(const std::string &Base) {
  std::lock_guard<std::mutex> Guard(FailedLock);
  return FailedBases.count(Base) != 0;
}

/// True the first time the host on Base is marked failed.
bool markHostFailed(const std::string &Base) {
  std::lock_guard<std::mutex> Guard(FailedLock);
  return FailedBases.insert(Base).second;
}

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point Deadline) {
  auto Left =
      std::chrono::duration_cast<std::chrono::milliseconds>(Deadline - Clock::now()).count();
  return Left > 0 ? int(Left) : 0;
}

bool isFifo(const std::string &Path) {
  struct stat St;
  return stat(Path.c_str(), &St) == 0 && S_ISFIFO(St.st_mode);
}

std::vector<mlopt::TensorSpec> headerFeatures(const std::vector<mlopt::TensorSpec> &Inputs,
                                              bool IncludeDefault) {
  std::vector<mlopt::TensorSpec> Specs = Inputs;
  if (IncludeDefault)
    Specs.push_back(fromLLVM(DefaultDecisionSpec));
  return Specs;
}

std::string errnoText(const char *What) { return std::string(What) + ": " + strerror(errno); }
} // namespace

InteractiveRunner::InteractiveRunner(LLVMContext &Ctx,
                                     const std::vector<llvm::TensorSpec> &Features,
                                     const std::string &Base, double TimeoutSeconds,
                                     bool IncludeDefault)
    : InlinePolicyRunner(Ctx, Kind::Interactive, Features), Base(Base),
      TimeoutMs(int(TimeoutSeconds * 1000)), IncludeDefault(IncludeDefault) {
  for (size_t I = 0; I < Features.size(); ++I)
    setUpBufferForTensor(I, Features[I], nullptr);
  if (!hostFailedOn(Base))
    openChannels();
}

InteractiveRunner::~InteractiveRunner() {
  Out.reset();
  if (InFd >= 0)
    close(InFd);
}

void InteractiveRunner::fail(const std::string &Why) {
  if (markHostFailed(Base))
    Ctx.diagnose(
        PluginDiagnostic(DS_Warning, "mlopt: interactive host on '" + Base + "': " + Why +
                                         "; finishing with the default inliner heuristic"));
  try {
    Out.reset();
  } catch (...) {
  }
  if (InFd >= 0)
    close(InFd);
  InFd = -1;
}

void InteractiveRunner::openChannels() {
  // A dead host must surface as EPIPE, not kill the compiler.
  signal(SIGPIPE, SIG_IGN);
  Clock::time_point Deadline = Clock::now() + std::chrono::milliseconds(TimeoutMs);
  std::string In = Base + ".in", OutPath = Base + ".out";
  // Like LLVM: the inbound channel first. Non-blocking, so a missing host
  // cannot hold the compiler; replies are awaited with poll().
  InFd = open(In.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (InFd < 0)
    return fail(errnoText(("cannot open inbound file " + In).c_str()));
  int OutFd = -1;
  if (isFifo(OutPath)) {
    // Succeeds only once the host has opened it for reading.
    while ((OutFd = open(OutPath.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      if (errno != ENXIO)
        return fail(errnoText(("cannot open outbound file " + OutPath).c_str()));
      if (!msLeft(Deadline))
        return fail("no reader opened " + OutPath + " within the timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    fcntl(OutFd, F_SETFL, fcntl(OutFd, F_GETFL) & ~O_NONBLOCK);
  } else {
    OutFd = open(OutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (OutFd < 0)
      return fail(errnoText(("cannot open outbound file " + OutPath).c_str()));
  }
  try {
    Out = std::make_unique<TrainingLogWriter>(std::make_unique<FdSink>(OutFd, true, OutPath),
                                              headerFeatures(inputs(), IncludeDefault),
                                              std::nullopt, fromLLVM(InlineDecisionSpec));
    Out->flush();
  } catch (const std::exception &E) {
    fail(E.what());
  }
}

void InteractiveRunner::switchContext(StringRef Name) {
  if (!Out)
    return;
  try {
    Out->switchContext(Name.str());
    Out->flush();
  } catch (const std::exception &E) {
    fail(E.what());
  }
}

bool InteractiveRunner::readReply(int64_t &Value) {
  char Buf[sizeof(int64_t)];
  size_t Have = 0;
  Clock::time_point Deadline = Clock::now() + std::chrono::milliseconds(TimeoutMs);
  while (Have < sizeof(Buf)) {
    struct pollfd P = {InFd, POLLIN, 0};
    int R = poll(&P, 1, msLeft(Deadline));
    if (R < 0 && errno == EINTR)
      continue;
    if (R == 0) {
      fail("no reply within " + std::to_string(TimeoutMs / 1000.0).substr(0, 5) + " s");
      return false;
    }
    ssize_t N = read(InFd, Buf + Have, sizeof(Buf) - Have);
    if (N < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (N < 0) {
      fail(errnoText("cannot read the reply"));
      return false;
    }
    if (N == 0) {
      fail("the host closed the channel");
      return false;
    }
    Have += size_t(N);
  }
  memcpy(&Value, Buf, sizeof(Value));
  return true;
}

void *InteractiveRunner::evaluateUntyped() {
  if (!Out)
    return fallBack();
  try {
    Out->startObservation();
    for (size_t I = 0; I < inputs().size(); ++I)
      Out->logTensorValue(I, getTensorUntyped(I), inputs()[I].byteSize());
    if (IncludeDefault) {
      int64_t Default = defaultDecision();
      Out->logTensorValue(inputs().size(), &Default, sizeof(Default));
    }
    Out->endObservation();
    Out->flush();
  } catch (const std::exception &E) {
    fail(E.what());
    return fallBack();
  }
  int64_t Value;
  if (!readReply(Value))
    return fallBack();
  // LLVM's meaning: any non-zero advice means "inline".
  Reply = Value != 0;
  return &Reply;
}

} // namespace mlopt
