// STUB until the engine part lands: replaced by the real implementation.
#include "engine/engine.h"

#include "core/error.h"

namespace striker {

std::unique_ptr<Engine> make_engine(const EngineConfig&, const FlintConfig&, std::unique_ptr<Backend>,
                                    const Tokenizer&) {
  throw Error("the engine is not available yet");
}

}  // namespace striker
