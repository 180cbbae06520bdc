#include "cli/hub_flags.h"

namespace striker::cli {

void add_hub_flags(CLI::App* cmd, HubFlags& flags, bool with_tokenizer_revision) {
  cmd->add_option("--revision", flags.revision, "Hub branch, tag or commit of a repo-id model (default: main)");
  if (with_tokenizer_revision)
    cmd->add_option("--tokenizer-revision", flags.tokenizer_revision,
                    "Hub revision of a repo-id --tokenizer (default: --revision)");
  cmd->add_option("--download-dir", flags.download_dir,
                  "Hugging Face cache folder to download into and load from (default: HF_HUB_CACHE, HF_HOME/hub, "
                  "~/.cache/huggingface/hub)");
}

}  // namespace striker::cli
