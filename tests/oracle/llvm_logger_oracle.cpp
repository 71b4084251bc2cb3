// Test oracle: replays a script of calls on LLVM 19's own llvm::Logger
// (libLLVM) so tests can compare mlopt's writer with LLVM byte for byte.
//
// Usage: llvm_logger_oracle SCRIPT OUT
// Script lines (hex = bytes in hexadecimal, "-" for none):
//   features <JSON array of tensor specs>
//   score <JSON spec or ->
//   advice <JSON spec or ->
//   begin                      (constructs the Logger: writes the header)
//   context <hex name>
//   start | end
//   tensor <index> <hex>
//   reward <hex>
#include "llvm/Analysis/TensorSpec.h"
#include "llvm/Analysis/Utils/TrainingLogger.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

using namespace llvm;

static std::string unhex(const std::string &H) {
  std::string Out;
  if (H == "-")
    return Out;
  for (size_t I = 0; I + 1 < H.size(); I += 2)
    Out += char(std::stoi(H.substr(I, 2), nullptr, 16));
  return Out;
}

static std::optional<TensorSpec> spec(LLVMContext &Ctx, const std::string &J) {
  auto V = json::parse(J);
  if (!V) {
    std::cerr << "bad JSON: " << toString(V.takeError()) << "\n";
    exit(3);
  }
  return getTensorSpecFromJSON(Ctx, *V);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    std::cerr << "usage: llvm_logger_oracle SCRIPT OUT\n";
    return 2;
  }
  LLVMContext Ctx;
  std::ifstream In(argv[1]);
  std::vector<TensorSpec> Features;
  std::optional<TensorSpec> Score, Advice;
  std::unique_ptr<Logger> L;
  std::string Line;
  while (std::getline(In, Line)) {
    std::istringstream S(Line);
    std::string Op;
    S >> Op;
    std::string Rest;
    std::getline(S, Rest);
    if (!Rest.empty() && Rest[0] == ' ')
      Rest.erase(0, 1);
    if (Op == "features") {
      auto V = json::parse(Rest);
      if (!V) {
        std::cerr << "bad JSON\n";
        return 3;
      }
      for (const json::Value &E : *V->getAsArray()) {
        auto TS = getTensorSpecFromJSON(Ctx, E);
        if (!TS) {
          std::cerr << "bad spec\n";
          return 3;
        }
        Features.push_back(*TS);
      }
    } else if (Op == "score") {
      if (Rest != "-")
        Score = spec(Ctx, Rest);
    } else if (Op == "advice") {
      if (Rest != "-")
        Advice = spec(Ctx, Rest);
    } else if (Op == "begin") {
      std::error_code EC;
      auto OS = std::make_unique<raw_fd_ostream>(argv[2], EC);
      if (EC) {
        std::cerr << "cannot open output\n";
        return 3;
      }
      TensorSpec Reward = Score ? *Score : TensorSpec::createSpec<float>("reward", {1});
      L = std::make_unique<Logger>(std::move(OS), Features, Reward, Score.has_value(), Advice);
    } else if (Op == "context") {
      L->switchContext(unhex(Rest));
    } else if (Op == "start") {
      L->startObservation();
    } else if (Op == "end") {
      L->endObservation();
    } else if (Op == "tensor") {
      std::istringstream T(Rest);
      size_t Index;
      std::string Hex;
      T >> Index >> Hex;
      std::string Bytes = unhex(Hex);
      L->logTensorValue(Index, Bytes.data());
    } else if (Op == "reward") {
      std::string Bytes = unhex(Rest);
      // logReward<T> writes the score spec's byte size starting at &Value.
      struct Blob {
        char B[1 << 16];
      };
      auto V = std::make_unique<Blob>();
      memcpy(V->B, Bytes.data(), std::min(Bytes.size(), sizeof(V->B)));
      L->logReward(*V);
    } else if (!Op.empty()) {
      std::cerr << "unknown op " << Op << "\n";
      return 3;
    }
  }
  L.reset();
  return 0;
}
