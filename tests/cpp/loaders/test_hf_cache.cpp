// resolve_model_path against a hand-built Hugging Face cache (offline: HF_HUB_OFFLINE, or a Hub
// endpoint that refuses connections). Downloads are tested against a fake Hub in
// tests/python/test_hub_download.py.
#include <gtest/gtest.h>

#include <cstdlib>

#include "loader_test_util.h"
#include "loaders/model_loader.h"

using namespace striker;
using namespace striker::test;

namespace {

// Sets environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~EnvGuard() {
    for (auto& [name, old] : saved_) {
      if (old.first) ::setenv(name.c_str(), old.second.c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    if (saved_.count(name)) return;
    const char* v = std::getenv(name);
    saved_[name] = {v != nullptr, v ? v : ""};
  }
  std::map<std::string, std::pair<bool, std::string>> saved_;
};

const char* kHfVars[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_OFFLINE",
                         "TRANSFORMERS_OFFLINE", "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"};

// Every test starts from a clean Hub environment, offline unless it says otherwise.
void offline_env(EnvGuard& env) {
  for (auto* v : kHfVars) env.unset(v);
  env.set("HF_HUB_OFFLINE", "1");
}

fs::path make_snapshot(const fs::path& hub, const std::string& folder, const std::string& rev) {
  fs::path repo = hub / folder;
  fs::create_directories(repo / "refs");
  write_bytes(repo / "refs" / "main", rev);  // no newline, as huggingface_hub writes it
  fs::path snap = repo / "snapshots" / rev;
  fs::create_directories(snap);
  return snap;
}

}  // namespace

TEST(HfCache, ExistingPathIsReturnedAsIs) {
  TempDir dir("local");
  EXPECT_EQ(resolve_model_path(dir.path().string()), dir.path().string());
}

TEST(HfCache, RepoIdResolvesThroughHfHubCache) {
  EnvGuard env;
  offline_env(env);
  TempDir hub("hub");
  fs::path snap = make_snapshot(hub.path(), "models--RecursiveSI--flint", "0123456789abcdef0123456789abcdef01234567");
  env.set("HF_HUB_CACHE", hub.path().string());
  EXPECT_EQ(fs::path(resolve_model_path("RecursiveSI/flint")), snap);
}

TEST(HfCache, HfHomeAndXdgAndHomeFallbacks) {
  EnvGuard env;
  offline_env(env);
  TempDir home("home");
  fs::path a = make_snapshot(home.path() / "hf" / "hub", "models--org--a", "aaaa");
  env.set("HF_HOME", (home.path() / "hf").string());
  EXPECT_EQ(fs::path(resolve_model_path("org/a")), a);
  env.unset("HF_HOME");
  fs::path b = make_snapshot(home.path() / "xdg" / "huggingface" / "hub", "models--org--b", "bbbb");
  env.set("XDG_CACHE_HOME", (home.path() / "xdg").string());
  EXPECT_EQ(fs::path(resolve_model_path("org/b")), b);
  env.unset("XDG_CACHE_HOME");
  const fs::path hub = home.path() / ".cache" / "huggingface" / "hub";
  fs::path c = make_snapshot(hub, "models--org--c", "cccc");
  write_bytes(hub / "models--org--c" / "refs" / "main", "cccc\n");  // a trailing newline is tolerated
  env.set("HOME", home.path().string());
  EXPECT_EQ(fs::path(resolve_model_path("org/c")), c);
}

TEST(HfCache, MissingRepoSaysWhereItLookedAndWhyNothingWasDownloaded) {
  EnvGuard env;
  offline_env(env);
  TempDir hub("hub");
  env.set("HF_HUB_CACHE", hub.path().string());
  std::string e = error_of([] { resolve_model_path("RecursiveSI/flint"); });
  EXPECT_NE(e.find(hub.path().string()), std::string::npos) << e;
  EXPECT_NE(e.find("models--RecursiveSI--flint/refs/main"), std::string::npos) << e;
  EXPECT_NE(e.find("HF_HUB_CACHE"), std::string::npos) << e;
  EXPECT_NE(e.find("HF_HUB_OFFLINE is set"), std::string::npos) << e;
  // --download-dir wins over the environment, and the error says so.
  e = error_of([&] { resolve_model_path("RecursiveSI/flint", {"", (hub.path() / "dl").string(), hub::Need::model}); });
  EXPECT_NE(e.find((hub.path() / "dl" / "models--RecursiveSI--flint").string()), std::string::npos) << e;
  EXPECT_NE(e.find("--download-dir"), std::string::npos) << e;
  // Online against an endpoint that refuses connections: the error names it and HF_HUB_OFFLINE.
  env.unset("HF_HUB_OFFLINE");
  env.set("HF_ENDPOINT", "http://127.0.0.1:1/");
  e = error_of([] { resolve_model_path("RecursiveSI/flint"); });
  EXPECT_NE(e.find("cannot reach the Hugging Face Hub at http://127.0.0.1:1 for repo 'RecursiveSI/flint'"),
            std::string::npos) << e;
  EXPECT_NE(e.find("HF_HUB_OFFLINE=1"), std::string::npos) << e;
  env.set("HF_HUB_OFFLINE", "1");
  // refs/main present but its snapshot missing.
  fs::create_directories(hub.path() / "models--RecursiveSI--flint" / "refs");
  write_bytes(hub.path() / "models--RecursiveSI--flint" / "refs" / "main", "deadbeef");
  e = error_of([] { resolve_model_path("RecursiveSI/flint"); });
  EXPECT_NE(e.find("no snapshot folder"), std::string::npos) << e;
}

TEST(HfCache, HostileRefsAndIdsAreRejected) {
  EnvGuard env;
  offline_env(env);
  TempDir hub("hub");
  env.set("HF_HUB_CACHE", hub.path().string());
  fs::create_directories(hub.path() / "models--org--x" / "refs");
  fs::create_directories(hub.path() / "outside");
  write_bytes(hub.path() / "models--org--x" / "refs" / "main", "../../outside");
  std::string e = error_of([] { resolve_model_path("org/x"); });
  EXPECT_NE(e.find("does not hold a commit hash"), std::string::npos) << e;
  for (const char* id : {"a/b/c", "/nonexistent/dir", "org/..", "org/na--me", "", "org/bad name", "org/x:../y.gguf",
                         "org/x:file.bin"}) {
    e = error_of([&] { resolve_model_path(id); });
    EXPECT_FALSE(e.empty()) << id;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  e = error_of([] { resolve_model_path("a/b/c"); });
  EXPECT_NE(e.find("not an existing file or directory, nor a Hugging Face repo id"), std::string::npos) << e;
}

TEST(HfCache, LoadModelResolvesRepoIds) {
  EnvGuard env;
  offline_env(env);
  TempDir hub("hub");
  fs::path snap = make_snapshot(hub.path(), "models--test--micro", "abc123");
  make_micro_checkpoint(snap, micro_config(), 1 << 30);
  env.set("HF_HUB_CACHE", hub.path().string());
  LoadedModel m = load_model("test/micro");
  EXPECT_EQ(m.source, "test/micro");
  EXPECT_EQ(m.config.hidden_size, 64);
}

TEST(HfCache, RevisionsAndNamedGgufResolveInTheCache) {
  EnvGuard env;
  offline_env(env);
  TempDir hub("hub");
  env.set("HF_HUB_CACHE", hub.path().string());
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  fs::path snap = make_snapshot(hub.path(), "models--org--g", commit);
  write_bytes(hub.path() / "models--org--g" / "refs" / "v1", commit);
  write_bytes(snap / "b.gguf", "GGUF");
  EXPECT_EQ(fs::path(resolve_model_path("org/g", {"v1", "", hub::Need::model})), snap);
  EXPECT_EQ(fs::path(resolve_model_path("org/g", {commit, "", hub::Need::model})), snap);  // a commit needs no ref
  EXPECT_EQ(fs::path(resolve_model_path("org/g:b.gguf")), snap / "b.gguf");
  std::string e = error_of([] { resolve_model_path("org/g:a.gguf"); });
  EXPECT_NE(e.find("a.gguf"), std::string::npos) << e;
  e = error_of([] { resolve_model_path("org/g", {"v2", "", hub::Need::model}); });
  EXPECT_NE(e.find("refs/v2"), std::string::npos) << e;
  e = error_of([] { resolve_model_path("org/g", {"../../x", "", hub::Need::model}); });
  EXPECT_NE(e.find("--revision"), std::string::npos) << e;
}
