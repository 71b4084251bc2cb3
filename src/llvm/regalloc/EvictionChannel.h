//===- EvictionChannel.h - LLVM's eviction channel, served in-process -*- C++ -*-===//
//
// Contract: lets LLVM's own ML eviction advisor (release mode with an
// interactive channel: InteractiveModelRunner, which writes each
// observation to <base>.out and reads an int64 index from <base>.in) run
// inside the process that asks it. The constructor makes the two FIFOs in a
// private temporary directory and holds both ends open (so LLVM's opens never
// block); a server thread parses what LLVM writes (TrainingLogParser) and
// answers every observation with Answer(header, payload) (OnHeader sees
// LLVM's header first). Answer runs on the
// server thread, one observation at a time, while the compiling thread
// waits for it; it must not throw (an exception is answered with
// FallbackIndex). unlink() removes the FIFOs once LLVM has opened them; the
// destructor stops the thread, which the caller does after LLVM's runner is
// gone (every question has been answered by then). Bytes LLVM writes that
// do not parse stop the channel from answering and are reported by error().
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_EVICTIONCHANNEL_H
#define MLOPT_LLVM_EVICTIONCHANNEL_H

#include "TrainingLogParser.h"

#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mlopt {

class EvictionChannel {
public:
  using Answer = std::function<int64_t(const LogHeader &, const char *Payload)>;
  using HeaderCallback = std::function<void(const LogHeader &)>;
  static constexpr int64_t FallbackIndex = 32; // "evict nothing"

  /// Throws FileError when the FIFOs cannot be made.
  EvictionChannel(Answer A, HeaderCallback OnHeader);
  ~EvictionChannel();
  EvictionChannel(const EvictionChannel &) = delete;
  EvictionChannel &operator=(const EvictionChannel &) = delete;

  /// The channel base LLVM is given (-regalloc-evict-interactive-channel-base).
  const std::string &base() const { return Base; }
  /// Removes the FIFOs and their directory (idempotent).
  void unlink();
  /// Why the channel stopped answering ("" while it works).
  std::string error() const;

private:
  void serve();

  Answer Decide;
  HeaderCallback OnHeader;
  std::string Dir, Base;
  int ToLLVM = -1;   // <base>.in, written by us
  int FromLLVM = -1; // <base>.out, read by us
  int StopPipe[2] = {-1, -1};
  mutable std::mutex ErrorMutex;
  std::string Error;
  std::thread Server;
};

} // namespace mlopt

#endif
