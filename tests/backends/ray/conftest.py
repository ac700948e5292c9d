"""One local multi-process Ray cluster for every Ray test (start-up is the slow part on 2 cores):
a head node and a second node, 1 CPU each, joined through its address like a real cluster.
Skipped when Ray (the optional ``ray`` extra) is not installed; CI installs it."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

if importlib.util.find_spec("ray") is None:  # Ray is an optional extra: pip install -e '.[ray]'
    collect_ignore_glob = ["test_*.py"]

#: pins the stores' creation time so that two builds of the same records are byte-identical
EPOCH = "1700000000"


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    import ray
    from ray.cluster_utils import Cluster

    from cm_gym.backends.ray.cluster import connect, disconnect

    saved = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = EPOCH  # nodes start now and their workers inherit it
    small = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=small)
    cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024)
    try:
        assert connect(cluster.address) is True  # joins the cluster: owns only the connection
        assert ray.cluster_resources().get("CPU") == 2 and len(ray.nodes()) == 2
        yield cluster.address
    finally:
        disconnect()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = saved
