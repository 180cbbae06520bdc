"""Hugging Face Hub downloads against a fake Hub on the loopback (fake_hub.py): striker fetches
only the files a model needs into the standard HF cache, resumes interrupted transfers with
Range, refuses corrupt files, honours HF_TOKEN / HF_HUB_OFFLINE / --revision / --download-dir,
and its cache and huggingface_hub's are interchangeable in both directions."""
import hashlib
import json
import os
import pathlib
import subprocess

import pytest

from fake_hub import FakeHub, Repo, git_blob_sha1
from server_fixture import StrikerServer

REPO = "test-org/tiny-flint"
IDS = "1,5,9,2,7"
HUB_VARS = ("HF_ENDPOINT", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
            "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture(scope="module")
def tiny(striker_bin, shared_dir, tmp_path_factory):
    """A Flint smaller than config.tiny.json (hidden 64, 3 layers: ~40 MB, most of it the
    embeddings of the real vocabulary) in 3 shards, so every test moves little data."""
    out = tmp_path_factory.mktemp("tiny")
    cfg = json.loads((shared_dir / "fixtures/flint-config/config.tiny.json").read_text())
    cfg.update(hidden_size=64, num_hidden_layers=3, first_k_dense_replace=1, intermediate_size=128,
               layer_types=["sliding_attention", "full_attention", "sliding_attention"])
    (out.parent / "config.json").write_text(json.dumps(cfg))
    subprocess.run([str(striker_bin), "make-model", "--config", str(out.parent / "config.json"), "--shard-size", "16",
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(out), "--seed", "5"],
                   check=True, capture_output=True, timeout=120)
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert len([n for n in files if n.endswith(".safetensors")]) > 1
    return files


@pytest.fixture(scope="module")
def local_scores(striker_bin, tiny, tmp_path_factory):
    d = tmp_path_factory.mktemp("local")
    for name, data in tiny.items():
        (d / name).write_bytes(data)
    return perplexity(striker_bin, str(d), {})


@pytest.fixture()
def hub(tiny):
    h = FakeHub()
    # Files a model does not need sit beside it: they must never be fetched.
    h.repos[REPO] = Repo(dict(tiny, **{"README.md": b"# tiny\n", "pytorch_model.bin": b"\0" * 4096}))
    yield h
    h.close()


def env_for(hub, cache, **extra):
    env = {k: v for k, v in os.environ.items() if k not in HUB_VARS}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf-home"),
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def perplexity(striker_bin, model, env, *args):
    r = subprocess.run([str(striker_bin), "perplexity", model, "--ids", IDS, "--device", "cpu", "--json", *args],
                       capture_output=True, text=True, env=env or None, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["logprobs"]


def run_striker(striker_bin, env, *args):
    return subprocess.run([str(striker_bin), *args], capture_output=True, text=True, env=env, timeout=120)


def repo_dir(cache):
    return cache / ("models--" + REPO.replace("/", "--"))


def needed(tiny):
    """What striker fetches of the repo: all of make-model's files, none of the extras beside them."""
    return sorted(tiny)


def test_download_matches_local_and_huggingface_hub_reads_the_cache(striker_bin, hub, tiny, local_scores, tmp_path):
    from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download
    cache = tmp_path / "cache"
    r = subprocess.run([str(striker_bin), "perplexity", REPO, "--ids", IDS, "--device", "cpu", "--json"],
                       capture_output=True, text=True, env=env_for(hub, cache), timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["logprobs"] == local_scores
    assert "striker: downloaded test-org/tiny-flint model.safetensors.index.json" in r.stderr  # one line per file
    commit = hub.repos[REPO].refs["main"]
    rd = repo_dir(cache)
    assert (rd / "refs" / "main").read_text() == commit
    snap = rd / "snapshots" / commit
    assert sorted(p.name for p in snap.iterdir()) == needed(tiny)
    for name, data in tiny.items():
        link = snap / name
        assert link.is_symlink()
        etag = hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else git_blob_sha1(data)
        assert os.readlink(link) == f"../../blobs/{etag}"
        assert link.read_bytes() == data
    assert not list((rd / "blobs").glob("*.incomplete"))
    # Nothing but the API call, HEADs and GETs of the needed files; LFS bytes came from the CDN
    # host without the token.
    fetched = {p.split("/resolve/main/")[-1] for m, p, _ in hub.requests("GET", "/resolve/")}
    assert "README.md" not in fetched and "pytorch_model.bin" not in fetched
    assert not hub.requests(contains="README.md") and not hub.requests(contains="pytorch_model.bin")

    # huggingface_hub, offline, sees a complete, well-formed cache.
    assert snapshot_download(REPO, cache_dir=str(cache), local_files_only=True) == str(snap)
    for name, data in tiny.items():
        assert pathlib.Path(hf_hub_download(REPO, name, cache_dir=str(cache), local_files_only=True)).read_bytes() == data
    info = scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    (repo_info,) = info.repos
    assert repo_info.repo_id == REPO and repo_info.size_on_disk == sum(len(d) for d in tiny.values())

    # A second run asks the Hub for the commit only: every file is in the snapshot.
    hub.clear_log()
    assert perplexity(striker_bin, REPO, env_for(hub, cache)) == local_scores
    assert [p for _, p, _ in hub.log] == [f"/api/models/{REPO}/revision/main"]


def test_offline_uses_the_cache_only(striker_bin, hub, local_scores, tmp_path):
    cache = tmp_path / "cache"
    r = run_striker(striker_bin, env_for(hub, cache, HF_HUB_OFFLINE=1), "perplexity", REPO, "--ids", IDS, "--device", "cpu")
    assert r.returncode != 0
    assert "HF_HUB_OFFLINE is set" in r.stderr and str(repo_dir(cache)) in r.stderr, r.stderr
    assert hub.log == []
    assert perplexity(striker_bin, REPO, env_for(hub, cache)) == local_scores
    hub.clear_log()
    assert perplexity(striker_bin, REPO, env_for(hub, cache, HF_HUB_OFFLINE=1)) == local_scores
    assert hub.log == []


def test_striker_reads_a_cache_huggingface_hub_wrote(striker_bin, hub, tiny, local_scores, tmp_path):
    from huggingface_hub import snapshot_download
    cache = tmp_path / "hf-cache"
    snap = snapshot_download(REPO, cache_dir=str(cache), endpoint=hub.url, allow_patterns=["*.json", "*.safetensors",
                                                                                            "*.jinja"])
    assert sorted(os.listdir(snap)) == needed(tiny)
    hub.clear_log()
    assert perplexity(striker_bin, REPO, env_for(hub, cache, HF_HUB_OFFLINE=1)) == local_scores
    assert hub.log == []


def test_interrupted_transfer_resumes_with_range(striker_bin, hub, tiny, local_scores, tmp_path):
    cache = tmp_path / "cache"
    shard = sorted(n for n in tiny if n.endswith(".safetensors"))[0]
    sha = hashlib.sha256(tiny[shard]).hexdigest()
    hub.faults[sha] = ["drop:1000"]
    assert perplexity(striker_bin, REPO, env_for(hub, cache)) == local_scores
    ranges = [h.get("range") for _, p, h in hub.requests("GET", f"/cdn/{sha}")]
    assert ranges == [None, "bytes=1000-"]
    assert (repo_dir(cache) / "blobs" / sha).read_bytes() == tiny[shard]


def test_a_failed_run_keeps_the_partial_file_and_the_next_run_resumes(striker_bin, hub, tiny, local_scores, tmp_path):
    cache = tmp_path / "cache"
    shard = sorted(n for n in tiny if n.endswith(".safetensors"))[-1]
    sha = hashlib.sha256(tiny[shard]).hexdigest()
    hub.faults[sha] = ["drop:2000"] + ["close"] * 5
    r = run_striker(striker_bin, env_for(hub, cache), "perplexity", REPO, "--ids", IDS, "--device", "cpu")
    assert r.returncode != 0
    assert "run the command again to resume" in r.stderr and shard in r.stderr, r.stderr
    part = repo_dir(cache) / "blobs" / f"{sha}.incomplete"
    assert part.read_bytes() == tiny[shard][:2000]
    assert not (repo_dir(cache) / "snapshots" / hub.repos[REPO].refs["main"] / shard).exists()
    assert not (repo_dir(cache) / "refs" / "main").exists()  # the revision is recorded once it is complete
    hub.clear_log()
    assert perplexity(striker_bin, REPO, env_for(hub, cache)) == local_scores
    assert [h.get("range") for _, p, h in hub.requests("GET", f"/cdn/{sha}")] == ["bytes=2000-"]
    assert not part.exists()


@pytest.mark.parametrize("lie", ["size", "sha256", "git-sha1"])
def test_wrong_size_or_checksum_is_refused_and_nothing_corrupt_is_kept(striker_bin, hub, tiny, tmp_path, lie):
    cache = tmp_path / "cache"
    shard = sorted(n for n in tiny if n.endswith(".safetensors"))[0]
    target = "tokenizer_config.json" if lie == "git-sha1" else shard
    sha = hashlib.sha256(tiny[shard]).hexdigest()
    if lie == "size":
        hub.claimed_size[sha] = len(tiny[shard]) + 10
    else:
        hub.claimed_sha[(REPO, target)] = ("ab" * 32) if lie == "sha256" else ("cd" * 20)
    r = run_striker(striker_bin, env_for(hub, cache), "perplexity", REPO, "--ids", IDS, "--device", "cpu")
    assert r.returncode != 0
    assert "is corrupt" in r.stderr and target in r.stderr, r.stderr
    expected = {"size": "bytes but the Hub says", "sha256": "SHA-256", "git-sha1": "git SHA-1"}[lie]
    assert expected in r.stderr, r.stderr
    rd = repo_dir(cache)
    assert not list((rd / "blobs").glob("*.incomplete"))
    assert not (rd / "snapshots" / hub.repos[REPO].refs["main"] / target).exists()
    for blob in (rd / "blobs").iterdir():  # every blob that was kept is what its name says
        data = blob.read_bytes()
        assert blob.name in (hashlib.sha256(data).hexdigest(), git_blob_sha1(data))


def test_tokens_go_to_the_hub_only_and_auth_failures_name_the_variable(striker_bin, hub, tiny, local_scores, tmp_path):
    hub.repos["test-org/private"] = Repo(tiny, token="hf_secret")
    hub.repos["test-org/gated"] = Repo(tiny, token="hf_granted", gated=True)
    cache = tmp_path / "cache"
    for repo, token, words in [("test-org/private", None, ["'test-org/private'", "set HF_TOKEN"]),
                               ("test-org/private", "hf_wrong", ["'test-org/private'", "the token from HF_TOKEN"]),
                               ("test-org/gated", "hf_wrong", ["'test-org/gated' is gated", "HF_TOKEN"]),
                               ("test-org/missing", "hf_secret", ["'test-org/missing' not found"])]:
        extra = {"HF_TOKEN": token} if token else {}
        r = run_striker(striker_bin, env_for(hub, cache, **extra), "perplexity", repo, "--ids", IDS, "--device", "cpu")
        assert r.returncode != 0
        for w in words:
            assert w in r.stderr, (repo, token, r.stderr)
    hub.clear_log()
    assert perplexity(striker_bin, "test-org/private", env_for(hub, cache, HF_TOKEN="hf_secret")) == local_scores
    hub_calls = [h for _, p, h in hub.log if not p.startswith("/cdn/")]
    cdn_calls = [h for _, p, h in hub.log if p.startswith("/cdn/")]
    assert hub_calls and all(h.get("authorization") == "Bearer hf_secret" for h in hub_calls)
    assert cdn_calls and not any("authorization" in h for h in cdn_calls)
    # The token file under HF_HOME works as huggingface_hub's does.
    (tmp_path / "hf-home").mkdir(exist_ok=True)
    (tmp_path / "hf-home" / "token").write_text("hf_secret\n")
    assert perplexity(striker_bin, "test-org/private", env_for(hub, tmp_path / "cache2")) == local_scores


def test_revision_download_dir_and_tokenizer_repo(striker_bin, hub, tiny, tmp_path):
    repo = hub.repos[REPO]
    v1 = repo.add_commit("v1", dict(tiny, **{"tokenizer_config.json": tiny["tokenizer_config.json"] + b" "}))
    dl = tmp_path / "dl"
    r = run_striker(striker_bin, env_for(hub, tmp_path / "unused"), "tokenize", REPO, "--text", "hello",
                    "--revision", "v1", "--download-dir", str(dl))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ids"]
    rd = repo_dir(dl)
    assert (rd / "refs" / "v1").read_text() == v1
    assert sorted(os.listdir(rd / "snapshots" / v1)) == ["chat_template.jinja", "tokenizer.json", "tokenizer_config.json"]
    assert not (tmp_path / "unused").exists()
    r = run_striker(striker_bin, env_for(hub, tmp_path / "c"), "tokenize", REPO, "--text", "x", "--revision", "nope")
    assert r.returncode != 0 and "revision 'nope' of repo 'test-org/tiny-flint' not found" in r.stderr, r.stderr


def test_a_renamed_repo_is_followed_through_relative_redirects(striker_bin, hub, tiny, tmp_path):
    from huggingface_hub import hf_hub_download
    hub.renamed["old-org/old-name"] = REPO
    cache = tmp_path / "cache"
    r = run_striker(striker_bin, env_for(hub, cache), "tokenize", "old-org/old-name", "--text", "hello")
    assert r.returncode == 0, r.stderr
    assert hub.requests("HEAD", "/old-org/old-name/resolve/") and hub.requests("HEAD", f"/{REPO}/resolve/")
    # Cached under the name the user asked for, as huggingface_hub does.
    path = hf_hub_download("old-org/old-name", "tokenizer.json", cache_dir=str(cache), local_files_only=True)
    assert pathlib.Path(path).read_bytes() == tiny["tokenizer.json"]


def test_gguf_repo_fetches_the_named_file_only(striker_bin, hub, tiny, tmp_path):
    hub.repos["test-org/ggufs"] = Repo({"a.gguf": b"GGUF-a" * 100, "b.gguf": b"GGUF-b" * 100,
                                        "config.json": tiny["config.json"]})
    cache = tmp_path / "cache"
    r = run_striker(striker_bin, env_for(hub, cache), "perplexity", "test-org/ggufs", "--ids", IDS, "--device", "cpu")
    assert r.returncode != 0 and "a.gguf, b.gguf" in r.stderr and "test-org/ggufs:FILE.gguf" in r.stderr, r.stderr
    r = run_striker(striker_bin, env_for(hub, cache), "perplexity", "test-org/ggufs:b.gguf", "--ids", IDS, "--device", "cpu")
    assert r.returncode != 0  # not a real GGUF: the loader says so, after the download
    assert "b.gguf" in r.stderr, r.stderr
    snap = repo_dir(cache).parent / "models--test-org--ggufs" / "snapshots" / hub.repos["test-org/ggufs"].refs["main"]
    assert sorted(os.listdir(snap)) == ["b.gguf", "config.json"]
    assert not hub.requests(contains="a.gguf")


def test_serve_downloads_a_repo_id_and_a_tokenizer_repo(striker_bin, hub, tiny, tmp_path):
    tok_files = {n: tiny[n] for n in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")}
    hub.repos["test-org/tok"] = Repo(dict(tok_files, **{"config.json": tiny["config.json"], "README.md": b"x"}))
    cache = tmp_path / "cache"
    env = env_for(hub, cache)
    server = StrikerServer(striker_bin, REPO, args=["--max-model-len", "256", "--tokenizer", "test-org/tok",
                                                    "--tokenizer-revision", "main"], env={**env}, log_dir=tmp_path)
    try:
        models = server.client().models.list()
        assert [m.id for m in models.data] == [REPO]
        out = server.client().completions.create(model=REPO, prompt="hi", max_tokens=3, temperature=0)
        assert 1 <= out.usage.completion_tokens <= 3
    finally:
        server.stop()
    assert (repo_dir(cache) / "refs" / "main").exists()
    tok_snap = cache / "models--test-org--tok" / "snapshots" / hub.repos["test-org/tok"].refs["main"]
    assert sorted(os.listdir(tok_snap)) == sorted(tok_files)
