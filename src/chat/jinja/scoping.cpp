// A reduction of jinja2's idtracking (FrameSymbolVisitor / Symbols) to what changes
// results: which names a frame treats as "undefined until assigned".
#include "chat/jinja/scoping.h"

#include <map>
#include <set>

namespace striker::jinja {
namespace {

enum class Ref { Param, Resolve, Undefined, Alias };

struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, Ref> refs;
  std::set<std::string> stores;

  bool find_ref(const std::string& name) const {
    for (const Symbols* s = this; s; s = s->parent)
      if (s->refs.count(name)) return true;
    return false;
  }
  void load(const std::string& name) {
    if (!find_ref(name)) refs[name] = Ref::Resolve;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (refs.count(name)) return;
    refs[name] = (parent && parent->find_ref(name)) ? Ref::Alias : Ref::Undefined;
  }
  void param(const std::string& name) {
    stores.insert(name);
    refs[name] = Ref::Param;
  }
  // A name stored in some but not all branches of an `if` is looked up outside instead.
  void branch_update(const std::vector<Symbols>& branches) {
    std::map<std::string, size_t> partial;
    for (const auto& b : branches)
      for (const auto& name : b.stores)
        if (!stores.count(name)) ++partial[name];
    for (const auto& b : branches) {
      for (const auto& [k, v] : b.refs) refs.insert({k, v});
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const auto& [name, count] : partial) {
      if (count == branches.size()) continue;
      refs[name] = (parent && parent->find_ref(name)) ? Ref::Alias : Ref::Resolve;
    }
  }
  std::vector<std::string> undefined_names() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : refs)
      if (v == Ref::Undefined) out.push_back(k);
    return out;
  }
};

void load_names(const Expr* e, Symbols& sym) {
  if (!e) return;
  if (e->kind == Expr::Kind::Name) sym.load(e->name);
  load_names(e->a.get(), sym);
  load_names(e->b.get(), sym);
  load_names(e->c.get(), sym);
  for (const auto& x : e->items) load_names(x.get(), sym);
  for (const auto& x : e->values) load_names(x.get(), sym);
  for (const auto& kw : e->kwargs) load_names(kw.value.get(), sym);
  for (const auto& [op, rhs] : e->comparisons) load_names(rhs.get(), sym);
}

// A frame nested in the one being analysed; analysed after it, with it as parent.
struct NestedFrame {
  Body* body;
  std::vector<std::string>* locals;
  std::vector<std::string> params;
  std::vector<const Expr*> loads_first;  // evaluated inside the frame before its body
  const Target* stored_target = nullptr;  // `with` targets
};

class FrameVisitor {
 public:
  FrameVisitor(Symbols& sym, std::vector<NestedFrame>& nested) : sym_(sym), nested_(nested) {}

  void visit_body(Body& body) {
    for (auto& s : body) visit(*s);
  }

 private:
  Symbols& sym_;
  std::vector<NestedFrame>& nested_;

  void store_target(const Target& t) {
    if (!t.attr.empty()) {
      sym_.load(t.names[0]);  // `ns.attr = ...` reads ns
      return;
    }
    for (const auto& n : t.names) sym_.store(n);
  }

  Symbols branch(Body* body, const Expr* test_in_branch) {
    Symbols copy = sym_;
    FrameVisitor v(copy, nested_);
    if (test_in_branch) load_names(test_in_branch, copy);
    if (body) v.visit_body(*body);
    return copy;
  }

  void visit_if(Stmt& s) {
    load_names(s.branches[0].first.get(), sym_);
    std::vector<Symbols> branches;
    branches.push_back(branch(&s.branches[0].second, nullptr));
    // jinja2 visits all elif branches as one branch of nested ifs.
    Symbols elifs = sym_;
    for (size_t i = 1; i < s.branches.size(); ++i) {
      load_names(s.branches[i].first.get(), elifs);
      Symbols inner = elifs;
      FrameVisitor iv(inner, nested_);
      iv.visit_body(s.branches[i].second);
      Symbols empty1 = elifs, empty2 = elifs;
      elifs.branch_update({inner, empty1, empty2});
    }
    branches.push_back(elifs);
    branches.push_back(branch(&s.else_body, nullptr));
    sym_.branch_update(branches);
  }

  void visit(Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Output: load_names(s.expr.get(), sym_); break;
      case Stmt::Kind::If: visit_if(s); break;
      case Stmt::Kind::For: {
        load_names(s.expr.get(), sym_);
        NestedFrame body{&s.body, &s.body_locals, s.target.names, {}, nullptr};
        body.params.push_back("loop");
        if (s.filter) body.loads_first.push_back(s.filter.get());
        nested_.push_back(std::move(body));
        nested_.push_back(NestedFrame{&s.else_body, &s.else_locals, {}, {}, nullptr});
        break;
      }
      case Stmt::Kind::Set:
        load_names(s.expr.get(), sym_);
        store_target(s.target);
        break;
      case Stmt::Kind::SetBlock: {
        store_target(s.target);
        NestedFrame body{&s.body, &s.body_locals, {}, {}, nullptr};
        if (s.filter) body.loads_first.push_back(s.filter.get());
        nested_.push_back(std::move(body));
        break;
      }
      case Stmt::Kind::Macro: {
        sym_.store(s.macro->name);
        nested_.push_back(macro_frame(*s.macro));
        break;
      }
      case Stmt::Kind::CallBlock:
        load_names(s.expr.get(), sym_);
        nested_.push_back(macro_frame(*s.macro));
        break;
      case Stmt::Kind::FilterBlock:
        load_names(s.filter.get(), sym_);
        nested_.push_back(NestedFrame{&s.body, &s.body_locals, {}, {}, nullptr});
        break;
      case Stmt::Kind::With: {
        NestedFrame body{&s.body, &s.body_locals, {}, {}, nullptr};
        for (const auto& [t, e] : s.with_assignments) {
          load_names(e.get(), sym_);
          for (const auto& n : t.names) body.params.push_back(n);
        }
        nested_.push_back(std::move(body));
        break;
      }
      case Stmt::Kind::Scope: nested_.push_back(NestedFrame{&s.body, &s.body_locals, {}, {}, nullptr}); break;
      default: break;
    }
  }

  static NestedFrame macro_frame(MacroDef& m) {
    NestedFrame f{&m.body, &m.locals, {}, {}, nullptr};
    for (const auto& p : m.params) {
      f.params.push_back(p.name);
      if (p.default_value) f.loads_first.push_back(p.default_value.get());
    }
    for (const char* special : {"varargs", "kwargs", "caller"}) f.params.push_back(special);
    return f;
  }
};

void analyze_frame(Body& body, const std::vector<std::string>& params, const std::vector<const Expr*>& loads_first,
                   const Symbols* parent, std::vector<std::string>& locals_out) {
  Symbols sym;
  sym.parent = parent;
  for (const auto& p : params) sym.param(p);
  for (const Expr* e : loads_first) load_names(e, sym);
  std::vector<NestedFrame> nested;
  FrameVisitor(sym, nested).visit_body(body);
  locals_out = sym.undefined_names();
  for (auto& f : nested) analyze_frame(*f.body, f.params, f.loads_first, &sym, *f.locals);
}

}  // namespace

std::vector<std::string> analyze_scoping(Body& root) {
  std::vector<std::string> locals;
  analyze_frame(root, {}, {}, nullptr, locals);
  return locals;
}

}  // namespace striker::jinja
