// STUB until the loaders part lands: replaced by the real implementation.
#include "loaders/model_loader.h"

#include "core/error.h"

namespace striker {

LoadedModel load_model(const std::string& model, const LoadOptions&) {
  throw Error("loading '" + model + "': model loading is not available yet");
}

std::string resolve_model_path(const std::string& model) { return model; }

}  // namespace striker
