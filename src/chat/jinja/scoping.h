// jinja2 decides at compile time where each name in a frame (the template, a loop body, a
// macro, a call/filter/set block) comes from. A name a frame assigns before it ever reads it
// is that frame's local from the start: nested frames that read it before the assignment
// runs see Undefined, not an outer or context value. This pass finds those names.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja/ast.h"

namespace striker::jinja {

// Fills Stmt::body_locals / else_locals and MacroDef::locals in the whole tree and returns
// the template (root frame) locals.
std::vector<std::string> analyze_scoping(Body& root);

}  // namespace striker::jinja
