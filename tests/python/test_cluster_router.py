"""Scale-out behind vllm-router (the router vLLM users deploy), on loopback and the CPU: three
replicas under continuous load survive a rolling restart (SIGTERM one at a time, restart, wait
for health) without one failed request, and a replica killed with SIGKILL costs at most the
requests that were running at that moment, none after."""
import signal
import time

import pytest

from cluster_fixture import Cluster, Load
from server_fixture import tiny_model  # noqa: F401  (fixture)


@pytest.fixture
def cluster(striker_bin, tiny_model, tmp_path):
    c = Cluster(striker_bin, tiny_model, 3, "round_robin", tmp_path)
    yield c
    c.stop()


def test_rolling_restart_under_load_fails_no_request(cluster):
    with Load(cluster.url, threads=4) as load:
        load.wait_for(12)
        for i in range(3):
            served_before = load.count()
            assert cluster.terminate(i) == 0, cluster.replicas[i].log()[-3000:]
            cluster.restart(i)
            cluster.wait_routed(i)
            load.wait_for(served_before + 8)
    failures = load.failures()
    assert not failures, f"{len(failures)} of {load.count()} requests failed: {failures[:5]}\n{cluster.router_log()[-3000:]}"
    assert load.count() >= 36
    for r in cluster.replicas:
        assert "draining" in r.log()


def test_sigkill_costs_only_the_requests_running_on_the_killed_replica(cluster):
    with Load(cluster.url, threads=4) as load:
        load.wait_for(12)
        killed_at = time.time()
        cluster.replicas[1].proc.send_signal(signal.SIGKILL)
        cluster.replicas[1].proc.wait()
        load.wait_for(load.count() + 24)
    late = [o for o in load.outcomes if o.start >= killed_at]
    assert len(late) >= 20
    assert all(o.ok for o in late), [o.detail for o in late if not o.ok][:5]
    # Whatever failed was running when the replica died: at most the 4 clients' requests then.
    failed = load.failures()
    assert all(o.start < killed_at < o.end for o in failed), [(o.start, o.end, killed_at) for o in failed]
    assert len(failed) <= 4
