// STUB until the loaders part lands: replaced by the real implementation.
#include "loaders/make_model.h"

#include "core/error.h"

namespace striker {

void make_random_checkpoint(const MakeModelOptions&) { throw Error("make-model is not available yet"); }

}  // namespace striker
