// vLLM's Hub flags, shared by the commands that take a model: --revision, --tokenizer-revision,
// --download-dir (the Hugging Face cache folder to download into and read from).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "loaders/model_loader.h"

namespace striker::cli {

struct HubFlags {
  std::string revision;
  std::string tokenizer_revision;
  std::string download_dir;

  // The request for the model (or --hf-config-path: vLLM reads it at --revision too).
  HubRequest model(hub::Need need) const { return {revision, download_dir, need}; }
  // The request for --tokenizer: --tokenizer-revision, else --revision (as vLLM).
  HubRequest tokenizer() const {
    return {tokenizer_revision.empty() ? revision : tokenizer_revision, download_dir, hub::Need::tokenizer};
  }
};

// Adds --revision and --download-dir, and --tokenizer-revision when the command has --tokenizer.
void add_hub_flags(CLI::App* cmd, HubFlags& flags, bool with_tokenizer_revision);

}  // namespace striker::cli
