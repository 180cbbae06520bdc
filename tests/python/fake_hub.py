"""A fake Hugging Face Hub on the loopback, for the download tests (standard library only).

It serves what `huggingface_hub` (and striker) call, with the headers the real Hub sends:
  GET  /api/models/{org}/{name}/revision/{rev}   -> {"id", "sha", "siblings": [{"rfilename"}]}
  GET  /api/models/{org}/{name}/tree/{rev}       -> [{"type": "file", "path", "size", "oid", "lfs"?}]
  HEAD|GET /{org}/{name}/resolve/{rev}/{file}    -> regular file: 200, ETag = git blob sha1;
       LFS file: 302 to a "CDN" URL on another host name (localhost instead of 127.0.0.1) with
       X-Linked-Etag = sha256 and X-Linked-Size; X-Repo-Commit on both.
  GET  /cdn/{sha256}                             -> the LFS bytes, with Range support.
A renamed repo answers 307 with a relative Location. Errors carry X-Error-Code as the Hub's do: RepoNotFound (401 without a token, as the Hub
answers for private repos), GatedRepo (403), RevisionNotFound / EntryNotFound (404).
Faults for the tests: a per-blob script of "drop:N" (send N body bytes, then close) and "close"
(close without answering), consumed one per CDN GET; and lies about a file's size or sha256.
Every request is logged (method, path, headers by lowercase name) for assertions.
"""
import hashlib
import http.server
import json
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin")


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, files: dict, token=None, gated=False):
        self.commits = {}   # commit -> {name: bytes}
        self.refs = {}      # branch/tag -> commit
        self.token = token  # required Bearer token, or None for a public repo
        self.gated = gated
        self.blobs = {}     # sha256 -> bytes: what the CDN serves
        self.add_commit("main", files)

    def add_commit(self, ref: str, files: dict) -> str:
        commit = hashlib.sha1(repr(sorted((k, hashlib.sha256(v).hexdigest()) for k, v in files.items())).encode()
                              + ref.encode()).hexdigest()
        self.commits[commit] = dict(files)
        self.refs[ref] = commit
        self.blobs.update({hashlib.sha256(v).hexdigest(): v for v in files.values()})
        return commit

    def commit_of(self, rev: str):
        return rev if rev in self.commits else self.refs.get(rev)


class FakeHub:
    def __init__(self):
        self.repos = {}
        self.log = []          # (method, path, {lowercase header name: value})
        self.faults = {}       # sha256 -> list of "drop:N" / "close"
        self.claimed_size = {}  # sha256 -> size to announce instead of the real one
        self.claimed_sha = {}   # (repo, file) -> sha256 to announce instead of the real one
        self.renamed = {}       # old repo id -> new repo id
        self._lock = threading.Lock()
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.cdn = f"http://localhost:{self.port}/cdn"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def requests(self, method=None, contains=""):
        with self._lock:
            return [r for r in self.log if (method is None or r[0] == method) and contains in r[1]]

    def clear_log(self):
        with self._lock:
            self.log.clear()

    # --- request handling ---------------------------------------------------------------
    def _handle(self, h, head):
        path = urllib.parse.urlsplit(h.path).path
        with self._lock:
            self.log.append((h.command, h.path, {k.lower(): v for k, v in h.headers.items()}))
        parts = [urllib.parse.unquote(p) for p in path.split("/")[1:]]
        # A renamed repo answers with a relative redirect to its new name, as the Hub does.
        for i in (0, 2):
            old = "/".join(parts[i:i + 2])
            if old in self.renamed and len(parts) > i + 2:
                h.send_response(307)
                h.send_header("Location", h.path.replace("/" + old + "/", "/" + self.renamed[old] + "/", 1))
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
        if parts[:1] == ["cdn"] and len(parts) == 2:
            return self._cdn(h, parts[1], head)
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] in ("revision", "tree"):
            return self._api(h, f"{parts[2]}/{parts[3]}", parts[4], parts[5])
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), head)
        self._error(h, 404, None, "unknown route")

    def _error(self, h, status, code, message, commit=None):
        body = json.dumps({"error": message}).encode()
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        if commit:
            h.send_header("X-Repo-Commit", commit)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)

    def _authorize(self, h, repo_id):
        """The repo, or None after answering the error the Hub gives."""
        repo = self.repos.get(repo_id)
        auth = h.headers.get("Authorization", "")
        if repo is None:
            self._error(h, 401 if not auth else 404, "RepoNotFound", "Repository not found")
            return None
        if repo.token is not None and auth != f"Bearer {repo.token}":
            if repo.gated and auth:
                self._error(h, 403, "GatedRepo", "Access to this gated repo is restricted")
            else:
                self._error(h, 401, "RepoNotFound", "Invalid credentials in Authorization header")
            return None
        return repo

    def _send_json(self, h, obj):
        body = json.dumps(obj).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _files_at(self, h, repo_id, rev):
        """(commit, files) of a repo at a revision, or (None, None) after answering the error."""
        repo = self._authorize(h, repo_id)
        if repo is None:
            return None, None
        commit = repo.commit_of(rev)
        if commit is None:
            self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None, None
        return commit, repo.commits[commit]

    def _api(self, h, repo_id, kind, rev):
        commit, files = self._files_at(h, repo_id, rev)
        if commit is None:
            return
        repo = self.repos[repo_id]
        if kind == "revision":
            return self._send_json(h, {"id": repo_id, "modelId": repo_id, "sha": commit, "private": repo.token is not None,
                                       "siblings": [{"rfilename": f} for f in sorted(files)]})
        entries = []
        for name, data in sorted(files.items()):
            e = {"type": "file", "path": name, "size": len(data), "oid": git_blob_sha1(data)}
            if name.endswith(LFS_SUFFIXES):
                e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(e)
        self._send_json(h, entries)

    def _resolve(self, h, repo_id, rev, name, head):
        commit, files = self._files_at(h, repo_id, rev)
        if commit is None:
            return
        data = files.get(name)
        if data is None:
            return self._error(h, 404, "EntryNotFound", f"{name} does not exist", commit=commit)
        if name.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            h.send_response(302)
            h.send_header("Location", f"{self.cdn}/{sha}?X-Amz-Signature=fake")
            h.send_header("X-Repo-Commit", commit)
            h.send_header("ETag", f'"{git_blob_sha1(data)}"')
            h.send_header("X-Linked-Etag", f'"{self.claimed_sha.get((repo_id, name), sha)}"')
            h.send_header("X-Linked-Size", str(self.claimed_size.get(sha, len(data))))
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        h.send_response(200)
        h.send_header("X-Repo-Commit", commit)
        h.send_header("ETag", f'"{self.claimed_sha.get((repo_id, name), git_blob_sha1(data))}"')
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if not head:
            h.wfile.write(data)

    def _blob(self, sha):
        for repo in self.repos.values():
            if sha in repo.blobs:
                return repo.blobs[sha]
        return None

    def _cdn(self, h, sha, head):
        if "Authorization" in h.headers:  # a real CDN would reject it; the tests check it never comes
            return self._error(h, 400, None, "Authorization header sent to the CDN")
        data = self._blob(sha)
        if data is None:
            return self._error(h, 404, None, "no such blob")
        with self._lock:
            script = self.faults.get(sha, [])
            fault = script.pop(0) if script else None
        if fault == "close":
            h.close_connection = True
            return
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{len(data)}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            h.send_response(200)
        body = data[start:]
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if head:
            return
        if fault and fault.startswith("drop:"):
            h.wfile.write(body[:int(fault[5:])])
            h.wfile.flush()
            h.close_connection = True
            return
        h.wfile.write(body)
