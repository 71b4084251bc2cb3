// mlopt._engine: the in-process compiler (libLLVM-19) for Python. It runs
// the plugin's advisor and runners on a module held as bitcode, then LLVM's
// code generation, in memory; python/mlopt/compiler/ is the public API.
// Every LLVM call runs with the GIL released; a Python policy callable is
// called with the GIL re-acquired. Policies arrive as mlopt._core.PolicyPool
// objects (the type is bound once, in _core, and shared through nanobind).

#include "CallSiteCosts.h"
#include "CallbackRunner.h"
#include "FunctionPropertiesTable.h"
#include "InProcessCompiler.h"
#include "PolicyModelPool.h"
#include "PolicyModelRunner.h"
#include "PyNames.h"
#include "TensorSpecConversion.h"
#include "TextSizeCache.h"

#include "llvm/Support/xxhash.h"

#include "ErrorTranslator.h"
#ifdef MLOPT_HAVE_REGALLOC
#include "EvictionDecider.h"
#endif

#include "llvm/Config/llvm-config.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <memory>
#include <optional>

namespace nb = nanobind;
using namespace nb::literals;
using namespace mlopt;

// One namespace per LLVM major: nanobind identifies bound C++ types by
// name, and _engine19 and _engine22 live in one process.
namespace MLOPT_ENGINE_NS {

/// A TextSizeCache of this major's engine (a type of its own, see above).
struct SizeCache final : TextSizeCache {
  using TextSizeCache::TextSizeCache;
};

/// A module as the engine keeps it: verified bitcode and a name for messages.
struct EngineModule {
  std::string Name;
  std::string Bitcode;
  std::string Triple;
  unsigned DefinedFunctions, OptimizedFunctions, OptNoneFunctions;
};

nb::bytes asBytes(const std::string &S) { return nb::bytes(S.data(), S.size()); }

template <typename T>
nb::ndarray<nb::numpy, T> ownedArray(std::vector<T> &&V, std::initializer_list<size_t> Shape) {
  auto *Heap = new std::vector<T>(std::move(V));
  nb::capsule Owner(Heap, [](void *P) noexcept { delete static_cast<std::vector<T> *>(P); });
  return nb::ndarray<nb::numpy, T>(Heap->data(), Shape, Owner);
}

/// What a Python policy callable did during one compile.
struct CallbackState {
  nb::handle Callable;
  std::optional<nb::python_error> Error;
  std::string BadAnswer;
  bool AppendDefault = false; // the int64 row ends with the heuristic's decision (inlining_default)
  bool AppendLinkage = false; // then with the callee's linkage class (callee_linkage)
  bool Failed() const { return Error.has_value() || !BadAnswer.empty(); }
};

template <typename T> nb::ndarray<nb::numpy, T> copiedArray(const T *Data, size_t Count) {
  auto *Copy = new T[Count + 1];
  std::memcpy(Copy, Data, Count * sizeof(T));
  nb::capsule Owner(Copy, [](void *P) noexcept { delete[] static_cast<T *>(P); });
  return nb::ndarray<nb::numpy, T>(Copy, {Count}, Owner);
}

/// Calls the policy with the int64 inputs (then, with AppendDefault, the
/// heuristic's decision; then, with AppendLinkage, the callee's linkage), and the float inputs
/// (IR2Vec's embeddings) as a second argument when there are any.
int64_t callPython(CallbackState &S, const int64_t *Ints, size_t IntCount, const float *Floats,
                   size_t FloatCount, int64_t Default, int64_t Linkage) {
  nb::gil_scoped_acquire Gil;
  if (S.Failed())
    return Default;
  try {
    std::vector<int64_t> Row;
    if (S.AppendDefault || S.AppendLinkage) {
      Row.assign(Ints, Ints + IntCount);
      if (S.AppendDefault)
        Row.push_back(Default);
      if (S.AppendLinkage)
        Row.push_back(Linkage);
      Ints = Row.data();
      IntCount = Row.size();
    }
    nb::object Answer =
        FloatCount ? S.Callable(copiedArray(Ints, IntCount), copiedArray(Floats, FloatCount))
                   : S.Callable(copiedArray(Ints, IntCount));
    int64_t D = -1;
    if (!nb::try_cast<int64_t>(Answer, D) || (D != 0 && D != 1)) {
      S.BadAnswer = nb::cast<std::string>(nb::repr(Answer));
      return Default;
    }
    return D;
  } catch (nb::python_error &E) {
    S.Error.emplace(std::move(E));
    return Default;
  }
}

#ifdef MLOPT_HAVE_REGALLOC
/// A Python callable deciding evictions: called with a dict of LLVM's
/// eviction features (numpy arrays, LLVM's shapes) and the default
/// advisor's column; returns a column. Its exception is re-raised after the
/// compile (the default advisor decides from then on).
class CallbackEvictionDecider final : public EvictionDecider {
public:
  explicit CallbackEvictionDecider(nb::handle Callable) : Callable(Callable) {}
  std::optional<int64_t> decide(const EvictionQuestion &Q, std::string &Raw) override {
    nb::gil_scoped_acquire Gil;
    if (Error)
      throw PolicyError("the callable failed earlier");
    try {
      nb::dict Obs;
      for (size_t I = 0; I < Q.Header.Features.size(); ++I) {
        const TensorSpec &S = Q.Header.Features[I];
        const char *P = Q.Payload + Q.Header.FeatureOffsets[I];
        if (S.type() == TensorType::Float)
          Obs[S.name().c_str()] = copiedArray(reinterpret_cast<const float *>(P), S.elementCount());
        else
          Obs[S.name().c_str()] =
              copiedArray(reinterpret_cast<const int64_t *>(P), S.elementCount());
      }
      nb::object Answer = Callable(Obs, Q.DefaultIndex);
      int64_t D = 0;
      if (!nb::try_cast<int64_t>(Answer, D)) {
        Raw = nb::cast<std::string>(nb::repr(Answer));
        return std::nullopt;
      }
      return D;
    } catch (nb::python_error &E) {
      std::string What = E.what();
      Error.emplace(std::move(E));
      throw PolicyError("the callable raised " + What.substr(0, What.find('\n')));
    }
  }
  nb::handle Callable;
  std::optional<nb::python_error> Error;
};
#endif

nb::dict compileBinding(const EngineModule &M, const std::string &Pipeline, int CodeGenLevel,
                        const std::string &TargetTriple, const std::string &RelocModel,
                        int LoopVectorize, int SLPVectorize, bool KeepObject, bool CallSites,
                        SizeCache *Cache, std::shared_ptr<PolicyModelPool> Pool,
                        nb::object Callable, const std::string &Forced,
                        const std::string &IR2VecVocab, bool Regalloc,
                        std::shared_ptr<PolicyModelPool> RegallocPool, nb::object RegallocCallable,
                        unsigned RegallocMaxEvictions, const std::string &FeatureUpkeep,
                        bool CallableDefault, bool TraceableCodegen,
                        const std::map<std::string, int> &ForcedCallees, bool CallableLinkage,
                        bool LogLinkage, bool Grouped, bool LinkTimeCodegen) {
  CompileOptions Options;
  Options.Pipeline = Pipeline;
  Options.CodeGenLevel = CodeGenLevel;
  Options.TargetTriple = TargetTriple;
  Options.RelocModel = RelocModel;
  Options.LoopVectorize = LoopVectorize;
  Options.SLPVectorize = SLPVectorize;
  Options.RecordCallSites = CallSites;
  Options.Cache = Cache;
  Options.KeepObject = KeepObject;
  Options.TraceableCodegen = TraceableCodegen;
  Options.LogCalleeLinkage = LogLinkage;
  Options.GroupedCode = Grouped;
  Options.LinkTimeCodegen = LinkTimeCodegen;
  if (Forced.find_first_not_of("01") != std::string::npos)
    throw nb::value_error("forced decisions must be a string of '0' and '1'");
  Options.ForcedDecisions = Forced;
  for (const auto &[Name, Decision] : ForcedCallees) {
    if (Decision != 0 && Decision != 1)
      throw nb::value_error(("forced_callees['" + Name + "'] must be 0 or 1").c_str());
    Options.ForcedCallees[Name] = Decision == 1;
  }
  Options.IR2VecVocab = IR2VecVocab;
  if (FeatureUpkeep == "llvm")
    Options.Features = mlopt::InlineFeatures::LLVM;
  else if (FeatureUpkeep == "mlopt")
    Options.Features = mlopt::InlineFeatures::Mlopt;
  else
    throw nb::value_error(
        ("feature_upkeep must be 'llvm' or 'mlopt', not '" + FeatureUpkeep + "'").c_str());
  bool HasRegallocCallable = RegallocCallable.is_valid() && !RegallocCallable.is_none();
  Options.Regalloc = Regalloc || RegallocPool || HasRegallocCallable;
  Options.RegallocMaxEvictions = RegallocMaxEvictions;
#ifdef MLOPT_HAVE_REGALLOC
  std::shared_ptr<CallbackEvictionDecider> EvictionCallback;
  if (HasRegallocCallable) {
    EvictionCallback = std::make_shared<CallbackEvictionDecider>(RegallocCallable);
    Options.RegallocDecider = EvictionCallback;
  }
#endif

  CallbackState Callback;
  Callback.Callable = Callable;
  Callback.AppendDefault = CallableDefault;
  Callback.AppendLinkage = CallableLinkage;
  std::shared_ptr<PolicyModel> Model;
  RunnerFactory Factory;
  CompileOutput Out;
  {
    nb::gil_scoped_release NoGil;
    if (Pool) {
      // Acquired before LLVM runs: loading may throw, LLVM frames must not see it.
      // The runner binds LLVM's inputs to the model's by name and throws
      // (an error diagnostic, so CompileError) when the model needs one LLVM
      // does not give.
      Model = Pool->acquire();
      Factory = [&Model](llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features)
          -> std::unique_ptr<InlinePolicyRunner> {
        return std::make_unique<PolicyModelRunner>(Ctx, Features, Model, /*Shadow=*/false,
                                                   /*PerRunnerWarnings=*/true);
      };
    } else if (Callable.is_valid() && !Callable.is_none()) {
      Factory = [&Callback](llvm::LLVMContext &Ctx, const std::vector<llvm::TensorSpec> &Features)
          -> std::unique_ptr<InlinePolicyRunner> {
        return std::make_unique<CallbackRunner>(
            Ctx, Features,
            [&Callback](const int64_t *I, size_t NI, const float *F, size_t NF, int64_t D,
                        int64_t L) { return callPython(Callback, I, NI, F, NF, D, L); });
      };
    }
#ifdef MLOPT_HAVE_REGALLOC
    std::shared_ptr<PolicyModel> EvictionModel;
    if (RegallocPool) {
      EvictionModel = RegallocPool->acquire();
      Options.RegallocDecider = std::make_shared<PolicyEvictionDecider>(EvictionModel);
    }
#endif
    Out = compileModule(M.Bitcode, M.Name, Options, Factory);
    Model.reset();
    Options.RegallocDecider.reset();
  }
  if (Callback.Error)
    throw *Callback.Error;
#ifdef MLOPT_HAVE_REGALLOC
  if (EvictionCallback && EvictionCallback->Error)
    throw *EvictionCallback->Error;
#endif
  if (!Callback.BadAnswer.empty())
    throw PolicyError(M.Name + ": the policy callable returned " + Callback.BadAnswer +
                      " for inlining_decision (expected 0 or 1)");
  nb::dict R;
  R["text_size"] = Out.TextSize;
  R["cache_hit"] = Out.CacheHit;
  R["object"] = KeepObject ? nb::object(asBytes(Out.Object)) : nb::none();
  if (Grouped) {
    nb::list Sections;
    for (const GroupedCode &G : Out.Grouped)
      Sections.append(nb::make_tuple(G.NameHash, G.Size));
    R["grouped_code"] = Sections;
  } else {
    R["grouped_code"] = nb::none();
  }
  R["log"] = asBytes(Out.TrainingLog);
  nb::list Warnings;
  for (const std::string &W : Out.Warnings)
    Warnings.append(decodeName(W)); // diagnostics may quote IR names
  R["warnings"] = Warnings;
  nb::list Sites;
  for (const auto &[Caller, Callee] : Out.CallSites)
    Sites.append(nb::make_tuple(decodeName(Caller), decodeName(Callee)));
  R["call_sites"] = Sites;
  if (Options.Regalloc) {
    R["regalloc_log"] = asBytes(Out.RegallocLog);
    nb::list Scores;
    for (const auto &[Function, Score, C] : Out.RegallocScores)
      Scores.append(nb::make_tuple(decodeName(Function), Score,
                                   nb::make_tuple(C[0], C[1], C[2], C[3], C[4], C[5])));
    R["regalloc_scores"] = Scores;
    R["regalloc_questions"] = Out.RegallocQuestions;
    R["regalloc_replaced"] = Out.RegallocReplaced;
  }
  return R;
}

} // namespace MLOPT_ENGINE_NS

using namespace MLOPT_ENGINE_NS;

// One module per LLVM major (_engine19, _engine22): NB_MODULE pastes its
// argument, so the name is expanded one level up.
#define MLOPT_NB_MODULE(Name, Var) NB_MODULE(Name, Var)
MLOPT_NB_MODULE(MLOPT_ENGINE_MODULE, m) {
  m.doc() = "mlopt's in-process compiler over one libLLVM major (see mlopt.compiler)";

  nb::module_::import_("mlopt._core"); // registers PolicyPool, TensorSpec
  m.attr("llvm_version") = LLVM_VERSION_STRING;
  m.attr("llvm_major") = LLVM_VERSION_MAJOR;
  registerErrorTranslator();

  nb::class_<EngineModule>(m, "Module", "Verified bitcode of one module.")
      .def(
          "__init__",
          [](EngineModule *Self, nb::bytes Data, nb::handle NameObject) {
            std::string Name = nameBytes(NameObject); // str (surrogate escapes) or bytes
            std::string Bytes(Data.c_str(), Data.size());
            LoadedModule Loaded;
            {
              nb::gil_scoped_release NoGil;
              Loaded = loadModule(Bytes, Name);
            }
            new (Self) EngineModule{Name,
                                    std::move(Loaded.Bitcode),
                                    std::move(Loaded.Triple),
                                    Loaded.DefinedFunctions,
                                    Loaded.OptimizedFunctions,
                                    Loaded.OptNoneFunctions};
          },
          "data"_a, "name"_a)
      .def_prop_ro("name", [](const EngineModule &M) { return decodeName(M.Name); })
      .def_ro("triple", &EngineModule::Triple)
      .def_ro("defined_functions", &EngineModule::DefinedFunctions)
      .def_ro("optimized_functions", &EngineModule::OptimizedFunctions)
      .def_ro("optnone_functions", &EngineModule::OptNoneFunctions)
      .def_prop_ro("bitcode", [](const EngineModule &M) { return asBytes(M.Bitcode); })
      .def_prop_ro("size", [](const EngineModule &M) { return M.Bitcode.size(); });

  nb::class_<SizeCache>(m, "TextSizeCache",
                        "The .text sizes of compiles already made, by (input, options, "
                        "decisions); lets a compile that repeats them skip code generation.")
      .def(nb::init<size_t, bool, uint64_t>(), "capacity"_a = size_t(1) << 20,
           "per_function"_a = true, "prefix_bytes"_a = uint64_t(0))
      .def_prop_ro("size", &TextSizeCache::size)
      .def_prop_ro("per_function", &TextSizeCache::perFunction)
      .def_prop_ro("functions_known", [](SizeCache &C) { return C.functions().size(); })
      .def_prop_ro("functions_reused", [](SizeCache &C) { return C.functions().reused(); })
      .def_prop_ro("functions_compiled", [](SizeCache &C) { return C.functions().compiled(); })
      .def_prop_ro("compiles_redone", [](SizeCache &C) { return C.functions().redone(); })
      .def_prop_ro("prefix_capacity", [](SizeCache &C) { return C.prefixes().capacity(); })
      .def_prop_ro("prefixes_known", [](SizeCache &C) { return C.prefixes().size(); })
      .def_prop_ro("prefix_bytes", [](SizeCache &C) { return C.prefixes().bytes(); })
      .def_prop_ro("prefix_hits", [](SizeCache &C) { return C.prefixes().hits(); })
      .def_prop_ro("prefix_misses", [](SizeCache &C) { return C.prefixes().misses(); })
      .def_prop_ro("hits", &TextSizeCache::hits)
      .def_prop_ro("misses", &TextSizeCache::misses);

  m.def(
      "section_name_hash", [](const std::string &Name) { return llvm::xxh3_64bits(Name); },
      "name"_a,
      "The hash compile(grouped_code=True) names a grouped code section by (xxh3-64 of its name).");
  m.def("compile", &compileBinding, "module"_a, "pipeline"_a, "codegen_level"_a, "target_triple"_a,
        "reloc_model"_a, "loop_vectorize"_a, "slp_vectorize"_a, "keep_object"_a, "call_sites"_a,
        "cache"_a.none(), "policy"_a.none(), "callable"_a.none(), "forced"_a = "",
        "ir2vec_vocab"_a = "", "regalloc"_a = false, "regalloc_policy"_a.none() = nb::none(),
        "regalloc_callable"_a.none() = nb::none(), "regalloc_max_evictions"_a = 100u,
        "feature_upkeep"_a = "mlopt", "callable_default"_a = false, "traceable_codegen"_a = false,
        "forced_callees"_a = std::map<std::string, int>(), "callable_linkage"_a = false,
        "log_linkage"_a = false, "grouped_code"_a = false, "link_time_codegen"_a = false);
  m.attr("regalloc_supported") = regallocSupported();
  m.attr("regalloc_source_version") = regallocSourceVersion();

  m.def(
      "function_properties",
      [](const EngineModule &M, bool Detailed) {
        FunctionPropertiesTable T;
        {
          nb::gil_scoped_release NoGil;
          T = functionProperties(M.Bitcode, M.Name, Detailed);
        }
        size_t Rows = T.Functions.size(), Cols = T.Fields.size();
        return nb::make_tuple(decodeNames(T.Functions), T.Fields,
                              ownedArray(std::move(T.Values), {Rows, Cols}));
      },
      "module"_a, "detailed"_a);

  m.def(
      "call_site_costs",
      [](const EngineModule &M) {
        std::vector<CallSiteCost> Sites;
        {
          nb::gil_scoped_release NoGil;
          Sites = callSiteCosts(M.Bitcode, M.Name);
        }
        std::vector<std::string> Callers, Callees;
        std::vector<int64_t> Costs;
        std::vector<uint8_t> Inlinable;
        for (CallSiteCost &S : Sites) {
          Callers.push_back(std::move(S.Caller));
          Callees.push_back(std::move(S.Callee));
          Costs.push_back(S.Cost);
          Inlinable.push_back(S.Inlinable);
        }
        size_t N = Costs.size();
        return nb::make_tuple(decodeNames(Callers), decodeNames(Callees),
                              ownedArray(std::move(Inlinable), {N}),
                              ownedArray(std::move(Costs), {N}));
      },
      "module"_a);
}
