//===- SimplificationProbe.h - what memoizing function simplification could save -*- C++ -*-===//
//
// Contract: a measuring recorder (docs/notes/simplification-memo.md, its
// first step); it changes nothing LLVM does. Registered on one compile's
// pass instrumentation, it times every run of the function simplification
// pipeline that the inliner's CGSCC walk starts (the function PassManager
// a CGSCCToFunctionPassAdaptor runs) and computes that run's memo key:
// the compile's input and options (InlinerPrefixCache's key), the
// function as printed (body, attributes, local use of metadata, with the
// metadata nodes it attaches), and the interface of every global it
// references (a callee's type, attributes and calling convention; a
// variable as printed, initializer included). A run is a hit when an
// earlier compile -- not this one -- ran the pipeline on the same key.
// Runs on functions of multi-function SCCs and in modules with debug info
// are never hits (the memo would not take them). The key is an
// approximation of the note's: globals are one level deep, and other
// library-named globals are not read, so hits may be slightly overcounted.
//
// Thread-safe: compiles on several threads share a probe; each compile
// keeps its own Session and adds its tally when it ends.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_LLVM_SIMPLIFICATIONPROBE_H
#define MLOPT_LLVM_SIMPLIFICATIONPROBE_H

#include "llvm/IR/PassInstrumentation.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace mlopt {

class SimplificationProbe {
public:
  using Key = std::pair<uint64_t, uint64_t>;

  struct Tally {
    uint64_t Compiles = 0;
    uint64_t Runs = 0;           // simplification pipeline runs in the inliner's walk
    uint64_t Hits = 0;           // of them, with a key an earlier compile saw
    uint64_t Unmemoizable = 0;   // runs in multi-function SCCs or debug-info modules
    double RunSeconds = 0;       // inside those runs
    double HitSeconds = 0;       // inside the hits
    double KeySeconds = 0;       // computing keys (the probe's own cost, not in RunSeconds)
    double OptimizerSeconds = 0; // the whole optimization pipeline, key time included
    double CodegenSeconds = 0;   // code generation, when the compile ran it
  };

  /// One compile: register its callbacks, then finish() once the compile ends.
  class Session {
  public:
    /// ModuleKey: what fixes the module before the walk (input and options).
    Session(SimplificationProbe &Probe, Key ModuleKey) : Probe(Probe), ModuleKey(ModuleKey) {}
    ~Session() { finish(); }
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
    void registerCallbacks(llvm::PassInstrumentationCallbacks &PIC);
    void addOptimizerSeconds(double S) { Own.OptimizerSeconds += S; }
    void addCodegenSeconds(double S) { Own.CodegenSeconds += S; }
    /// Adds this compile's tally and keys to the probe; once (the destructor
    /// calls it when the compile did not).
    void finish();

  private:
    using Clock = std::chrono::steady_clock;
    SimplificationProbe &Probe;
    Key ModuleKey;
    Tally Own;
    std::vector<Key> Keys;
    bool Finished = false;
    // The walk's adaptor: active between its before and after callbacks.
    bool InAdaptor = false;
    bool SingletonSCC = false;
    unsigned Depth = 0; // passes open inside the adaptor
    bool Memoizable = false;
    bool Hit = false;
    Clock::time_point Start;
  };

  Tally tally() const;

private:
  bool seen(const Key &K) const;
  void add(const Tally &T, const std::vector<Key> &Keys);

  mutable std::mutex Lock;
  std::set<Key> Seen;
  Tally Total;
};

} // namespace mlopt

#endif
