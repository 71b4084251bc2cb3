//===- LTOModuleSaver.h - The modules lld optimizes, saved as a corpus -*- C++ -*-===//
//
// Contract: installLTOModuleSaver(PB, Dir) makes every pipeline PB builds
// inside lld save its module, once, before the pipeline's first pass: the
// merged, internalized module of a full-LTO link (identifier "ld-temp.o"),
// or a ThinLTO backend's post-import module, exactly as the pipeline
// receives it (use-list order kept, so a compile of it is the backend's).
// It goes to <Dir>/<name>.bc, <name> as a link-time training log's module
// name (TrainingLogPath.h: "<output>.lto", "<output>.thinlto/<source>")
// with the output's absolute path (so that the binaries of a whole build
// keep apart), with <name>.link.json: {"lto": "full"|"thin", "output" (as
// given), "output_path", "cwd", "module", "module_name" (the name %m gives
// it in the plugin's per-module paths: the output as given), "source",
// "shared", "reloc_model": "pic"|"static", "lto_level": "O<n>", "llvm"} --
// the link's facts an in-process compile needs (LinkCommandLine.h). A file
// of that name is replaced (a relink saves its modules again). Outside lld
// (a compile) nothing is saved. A module that cannot be written is one
// warning; the link goes on.
//
//===----------------------------------------------------------------------===//
#ifndef MLOPT_PLUGIN_LTOMODULESAVER_H
#define MLOPT_PLUGIN_LTOMODULESAVER_H

#include <string>

namespace llvm {
class PassBuilder;
}

namespace mlopt {

void installLTOModuleSaver(llvm::PassBuilder &PB, const std::string &Dir);

} // namespace mlopt

#endif
