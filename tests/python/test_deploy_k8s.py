"""deploy/k8s: every manifest validates against the Kubernetes API schema (kubernetes-validate,
strict: unknown fields are errors), and the serving contract holds: readiness from /health, a
startup probe long enough to load the weights, one GPU per replica, one shared HF cache, a grace
period longer than the drain, and a router that lists every replica with its KV event source."""
import pathlib
import re

import kubernetes_validate
import pytest
import yaml

K8S = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "k8s"
KUBE_VERSION = "1.33.0"


def documents():
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def find(kind, name):
    matches = [d for _, d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}"
    return matches[0]


def flag(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]
    return values[0] if values else None


@pytest.mark.parametrize("name,doc", documents(), ids=lambda v: v if isinstance(v, str) else v["kind"] + "/" + v["metadata"]["name"])
def test_manifest_validates_against_the_api_schema(name, doc):
    kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_manifests_parse_and_hold_the_expected_objects():
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for _, d in documents())
    assert kinds == ["Deployment/striker-router", "PersistentVolumeClaim/striker-hf-cache", "Service/striker",
                     "Service/striker-router", "StatefulSet/striker"]


def test_replicas_probe_health_use_a_gpu_and_share_the_hf_cache():
    sts = find("StatefulSet", "striker")
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    startup = c["startupProbe"]
    assert startup["httpGet"]["path"] == "/health"
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 20 * 60, "weights need minutes to load"
    # A draining replica answers 503 on /health; liveness must not restart it for that.
    assert c["livenessProbe"]["httpGet"]["path"] != "/health"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" == c["resources"]["requests"]["nvidia.com/gpu"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["PYTHONHASHSEED"] == "0", "kv_aware needs every replica to hash blocks alike"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["hf-cache"] == env["HF_HOME"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == "hf-cache"]
    pvc = find("PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"])
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "one cache shared by every replica"
    assert c["args"][0] == "serve"


def test_grace_period_outlasts_the_drain():
    sts = find("StatefulSet", "striker")
    pod = sts["spec"]["template"]["spec"]
    timeout = int(flag(pod["containers"][0]["args"], "--shutdown-timeout"))
    assert timeout > 0
    assert pod["terminationGracePeriodSeconds"] >= timeout + 10


def test_router_lists_every_replica_with_its_kv_event_source():
    sts = find("StatefulSet", "striker")
    n = sts["spec"]["replicas"]
    service = sts["spec"]["serviceName"]
    assert find("Service", service)["spec"]["clusterIP"] == "None"
    args = find("Deployment", "striker-router")["spec"]["template"]["spec"]["containers"][0]["args"]
    i = args.index("--worker-urls")
    urls = []
    for a in args[i + 1:]:
        if a.startswith("--"):
            break
        urls.append(a)
    assert urls == [f"http://striker-{k}.{service}:8000" for k in range(n)]
    sources = [a.split("=", 1)[1] for a in args if a.startswith("--kv-event-source=")]
    assert sources == [f"{u}=tcp://striker-{k}.{service}:5557" for k, u in enumerate(urls)]
    assert flag(args, "--policy") == "kv_aware"
    serve_args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert flag(args, "--kv-event-model") == flag(serve_args, "--served-model-name")
    cfg = flag(serve_args, "--kv-events-config")
    assert re.search(r'"endpoint":"tcp://\*:5557"', cfg) and '"enable_kv_cache_events":true' in cfg
