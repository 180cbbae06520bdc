// The pure parts of the Hub client: repo specs, settings from the environment, URLs, headers,
// the cache layout, which files a model needs, and the messages for failed calls.
#include <gtest/gtest.h>

#include <cstdlib>

#include "loader_test_util.h"
#include "loaders/file_digest.h"
#include "loaders/hub_http.h"
#include "loaders/hub_repo.h"

using namespace striker;
using namespace striker::hub;
using namespace striker::test;

namespace {

std::string error_of_plan(const std::vector<std::string>& siblings, Need need, const std::string& gguf = "") {
  try {
    plan_files("org/m", siblings, need, gguf);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Sets variables for one test and restores the old values afterwards.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
    }
  }
};

}  // namespace

TEST(HubRepo, ParsesRepoIdsAndNamedGgufFiles) {
  auto s = parse_repo_spec("RecursiveSI/flint");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->repo_id, "RecursiveSI/flint");
  EXPECT_EQ(s->file, "");
  s = parse_repo_spec("RecursiveSI/flint-nvfp4-gguf:flint-Q4.gguf");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->repo_id, "RecursiveSI/flint-nvfp4-gguf");
  EXPECT_EQ(s->file, "flint-Q4.gguf");
  EXPECT_TRUE(parse_repo_spec("org/m:sub/dir/x.gguf"));
  for (const char* bad : {"flint", "a/b/c", "org/", "/name", "org/..", "org/-x", "org/x:", "org/x:y.bin", "org/x:../y.gguf",
                          "org/x:/abs.gguf", "org/bad name"})
    EXPECT_FALSE(parse_repo_spec(bad)) << bad;
}

TEST(HubRepo, UrlsQuoteRevisionsAndFilesAsHuggingfaceHub) {
  EXPECT_EQ(url_quote("refs/pr/1", ""), "refs%2Fpr%2F1");
  EXPECT_EQ(url_quote("a b/c+d.json"), "a%20b/c%2Bd.json");
  EXPECT_EQ(api_revision_url("https://huggingface.co", "org/m", "refs/pr/1"),
            "https://huggingface.co/api/models/org/m/revision/refs%2Fpr%2F1");
  EXPECT_EQ(resolve_url("http://127.0.0.1:9", "org/m", "main", "sub dir/model.safetensors"),
            "http://127.0.0.1:9/org/m/resolve/main/sub%20dir/model.safetensors");
  EXPECT_EQ(url_origin("https://User@HF.co:443/a/b?x"), "https://hf.co:443");
  EXPECT_EQ(url_origin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(url_origin("/relative/path"), "");
  EXPECT_NE(url_origin("http://localhost:80/cdn"), url_origin("http://127.0.0.1:80/org"));
}

TEST(HubRepo, HeadersGiveEtagSizeCommitAndLocation) {
  Headers h;
  add_header_line("HTTP/1.1 307 Temporary Redirect", h);
  add_header_line("Location: /org/renamed/resolve/main/x", h);
  add_header_line("HTTP/1.1 302 Found", h);  // a new response: the redirect's headers are gone
  EXPECT_TRUE(h.empty());
  add_header_line("X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567", h);
  add_header_line("ETag: W/\"1111111111111111111111111111111111111111\"", h);
  add_header_line("x-linked-etag:   \"abcdef\"  ", h);
  add_header_line("X-Linked-Size: 123456789012", h);
  add_header_line("Location: https://cdn.example/blob?sig=1", h);
  add_header_line("Content-Length: 1093", h);
  add_header_line("no colon here", h);
  FileMetadata m = file_metadata(h, 302, "https://hf.co/org/m/resolve/main/model.safetensors");
  EXPECT_EQ(m.etag, "abcdef");
  ASSERT_TRUE(m.size);
  EXPECT_EQ(*m.size, 123456789012);
  EXPECT_EQ(m.commit, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(m.location, "https://cdn.example/blob?sig=1");

  // A regular file: ETag and Content-Length of the 200 itself.
  Headers r;
  add_header_line("ETag: \"2222222222222222222222222222222222222222\"", r);
  add_header_line("Content-Length: 42", r);
  m = file_metadata(r, 200, "https://hf.co/org/m/resolve/main/config.json");
  EXPECT_EQ(m.etag, "2222222222222222222222222222222222222222");
  EXPECT_EQ(m.size.value_or(-1), 42);
  EXPECT_EQ(m.location, "https://hf.co/org/m/resolve/main/config.json");
  // The Content-Length of a redirect is not the file's size.
  Headers redirect;
  add_header_line("Content-Length: 0", redirect);
  EXPECT_FALSE(file_metadata(redirect, 302, "u").size);
  EXPECT_EQ(normalize_etag(" W/\"x\" "), "x");
}

TEST(HubRepo, CacheLayoutMatchesHuggingfaceHub) {
  CacheLayout l("/c", "org/name");
  EXPECT_EQ(l.repo_dir(), fs::path("/c/models--org--name"));
  EXPECT_EQ(l.blob("e"), fs::path("/c/models--org--name/blobs/e"));
  EXPECT_EQ(l.incomplete("e"), fs::path("/c/models--org--name/blobs/e.incomplete"));
  EXPECT_EQ(l.pointer("c0", "sub/x.json"), fs::path("/c/models--org--name/snapshots/c0/sub/x.json"));
  EXPECT_EQ(l.ref("refs/pr/1"), fs::path("/c/models--org--name/refs/refs/pr/1"));
  EXPECT_EQ(l.lock("e"), fs::path("/c/.locks/models--org--name/e.lock"));
  EXPECT_EQ(CacheLayout::pointer_target("config.json", "e"), "../../blobs/e");
  EXPECT_EQ(CacheLayout::pointer_target("a/b/x.json", "e"), "../../../../blobs/e");
}

TEST(HubRepo, SafeNames) {
  for (const char* ok : {"config.json", "a/b.safetensors", "model-00001-of-00002.safetensors"})
    EXPECT_TRUE(is_safe_repo_file(ok)) << ok;
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a//b", "a/", "./a", "a\\b", "a\nb"})
    EXPECT_FALSE(is_safe_repo_file(bad)) << bad;
  EXPECT_TRUE(is_safe_blob_name("0123abcDEF-_"));
  EXPECT_FALSE(is_safe_blob_name("../x"));
  EXPECT_FALSE(is_safe_blob_name(""));
  EXPECT_TRUE(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(is_commit_hash("main"));
  EXPECT_FALSE(is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));
}

TEST(HubRepo, PlansOnlyTheFilesTheModelNeeds) {
  const std::vector<std::string> sharded = {"README.md", "config.json", "generation_config.json", "tokenizer.json",
                                            "tokenizer_config.json", "model.safetensors.index.json",
                                            "model-00001-of-00002.safetensors", "pytorch_model.bin", "x.gguf"};
  FilePlan p = plan_files("org/m", sharded, Need::model, "");
  EXPECT_EQ(p.files, (std::vector<std::string>{"config.json", "generation_config.json", "tokenizer.json",
                                               "tokenizer_config.json", "model.safetensors.index.json"}));
  EXPECT_TRUE(p.needs_index);
  EXPECT_EQ(plan_files("org/m", sharded, Need::model_no_weights, "").files.size(), 4u);
  p = plan_files("org/m", {"tokenizer.json", "special_tokens_map.json", "chat_template.jinja", "config.json"},
                 Need::tokenizer, "");
  EXPECT_EQ(p.files, (std::vector<std::string>{"tokenizer.json", "special_tokens_map.json", "chat_template.jinja"}));
  p = plan_files("org/m", {"config.json", "model.safetensors", "x.gguf"}, Need::model, "");
  EXPECT_EQ(p.files.back(), "model.safetensors");
  EXPECT_TRUE(p.gguf.empty());
  // GGUF: the only one, or the one named; several unnamed is an error listing them.
  p = plan_files("org/m", {"README.md", "q.gguf"}, Need::model, "");
  EXPECT_EQ(p.files, std::vector<std::string>{"q.gguf"});
  EXPECT_EQ(p.gguf, "q.gguf");
  p = plan_files("org/m", {"a.gguf", "b.gguf", "config.json"}, Need::model, "b.gguf");
  EXPECT_EQ(p.files, (std::vector<std::string>{"config.json", "b.gguf"}));
  std::string e = error_of_plan({"a.gguf", "b.gguf"}, Need::model);
  EXPECT_NE(e.find("a.gguf, b.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("org/m:FILE.gguf"), std::string::npos) << e;
  e = error_of_plan({"a.gguf"}, Need::model, "c.gguf");
  EXPECT_NE(e.find("'c.gguf'"), std::string::npos) << e;
  EXPECT_NE(error_of_plan({"config.json", "README.md"}, Need::model).find("no weights"), std::string::npos);
  EXPECT_NE(error_of_plan({"config.json"}, Need::tokenizer).find("no tokenizer.json"), std::string::npos);
  EXPECT_NE(error_of_plan({"tokenizer.json"}, Need::config).find("no config.json"), std::string::npos);
}

TEST(HubRepo, IndexShardsAreUniqueSortedAndSafe) {
  EXPECT_EQ(index_shards(R"({"metadata": {}, "weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors",
                            "c": "m-2.safetensors"}})", "idx"),
            (std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"}));
  for (const char* bad : {R"({"weight_map": {"a": "../../etc/passwd"}})", R"({"weight_map": {}})", R"({"x": 1})",
                          R"({"weight_map": {"a": 3}})", "not json"}) {
    bool threw = false;
    try {
      index_shards(bad, "idx");
    } catch (const std::exception& e) {
      threw = std::string(e.what()).find("idx") != std::string::npos;
    }
    EXPECT_TRUE(threw) << bad;
  }
}

TEST(HubRepo, SettingsFollowHuggingfaceHubPrecedence) {
  ScopedEnv env;
  for (const char* v : {"HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HF_TOKEN",
                        "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                        "HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"})
    env.set(v, nullptr);
  TempDir home("home");
  env.set("HOME", home.path().c_str());
  HubSettings s = settings_from_env();
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_EQ(s.cache_dir, home.path() / ".cache/huggingface/hub");
  EXPECT_FALSE(s.offline);
  EXPECT_TRUE(s.token.empty());
  // The token file under HF_HOME, then HF_TOKEN over it.
  env.set("HF_HOME", (home.path() / "hf").c_str());
  fs::create_directories(home.path() / "hf");
  write_bytes(home.path() / "hf" / "token", "hf_file\n");
  s = settings_from_env();
  EXPECT_EQ(s.cache_dir, home.path() / "hf" / "hub");
  EXPECT_EQ(s.token, "hf_file");
  EXPECT_EQ(s.token_source, (home.path() / "hf" / "token").string());
  env.set("HF_TOKEN", "hf_env");
  env.set("HF_ENDPOINT", "http://127.0.0.1:5000//");
  env.set("HF_HUB_CACHE", "~/hubcache");
  env.set("HF_HUB_OFFLINE", "true");
  s = settings_from_env();
  EXPECT_EQ(s.token, "hf_env");
  EXPECT_EQ(s.token_source, "HF_TOKEN");
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:5000");
  EXPECT_EQ(s.cache_dir, home.path() / "hubcache");
  EXPECT_EQ(s.cache_chosen_by, "HF_HUB_CACHE");
  EXPECT_TRUE(s.offline);
  s = settings_from_env("/dl");
  EXPECT_EQ(s.cache_dir, fs::path("/dl"));
  EXPECT_EQ(s.cache_chosen_by, "--download-dir");
  env.set("HF_HUB_DOWNLOAD_TIMEOUT", "soon");
  EXPECT_THROW(settings_from_env(), std::exception);
}

TEST(HubRepo, FailuresNameTheRepoAndTheTokenVariable) {
  HubSettings s;
  s.endpoint = "http://hub";
  HttpResult r;
  r.url = "http://hub/api/models/org/m/revision/main";
  r.status = 401;
  r.headers["x-error-code"] = "RepoNotFound";
  std::string m = describe_failure(r, s, "org/m", "main", "");
  EXPECT_NE(m.find("repo 'org/m'"), std::string::npos) << m;
  EXPECT_NE(m.find("set HF_TOKEN"), std::string::npos) << m;
  s.token = "x";
  s.token_source = "HF_TOKEN";
  m = describe_failure(r, s, "org/m", "main", "");
  EXPECT_NE(m.find("the token from HF_TOKEN was sent"), std::string::npos) << m;
  r.status = 403;
  r.headers["x-error-code"] = "GatedRepo";
  m = describe_failure(r, s, "org/m", "main", "config.json");
  EXPECT_NE(m.find("gated"), std::string::npos) << m;
  EXPECT_NE(m.find("HF_TOKEN"), std::string::npos) << m;
  r.status = 404;
  r.headers["x-error-code"] = "RevisionNotFound";
  m = describe_failure(r, s, "org/m", "v9", "");
  EXPECT_NE(m.find("revision 'v9' of repo 'org/m' not found"), std::string::npos) << m;
  r.headers["x-error-code"] = "EntryNotFound";
  m = describe_failure(r, s, "org/m", "main", "model.safetensors");
  EXPECT_NE(m.find("file 'model.safetensors' of repo 'org/m' not found"), std::string::npos) << m;
  r.status = 0;
  r.transport_error = "Connection refused";
  m = describe_failure(r, s, "org/m", "main", "");
  EXPECT_NE(m.find("cannot reach the Hugging Face Hub at http://hub"), std::string::npos) << m;
  EXPECT_NE(m.find("Connection refused"), std::string::npos) << m;
}

TEST(HubRepo, DigestsMatchTheHubsEtags) {
  TempDir dir("digest");
  write_bytes(dir.path() / "f", "hello\n");
  // `printf 'hello\n' | sha256sum` and `git hash-object`.
  EXPECT_EQ(sha256_file_hex(dir.path() / "f"), "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_EQ(git_blob_sha1_file_hex(dir.path() / "f"), "ce013625030ba8dba906f756967f9e9ca394464a");
}
