"""Start a local Ray instance or join an existing cluster, with one clear error when Ray is missing
or a cluster cannot be reached.

Local by default: ``ray.init`` with `num_cpus` workers, no dashboard and a small object store (our
objects are unit folders and snapshots of a few MB; a small store starts faster on a laptop). With
an address (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``) the driver joins that cluster and
uses its resources.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from cm_gym.core.types import CmGymError

logger = logging.getLogger(__name__)

#: object store of a local instance (bytes); RAY_OBJECT_STORE_MEMORY overrides it
LOCAL_OBJECT_STORE = 512 * 1024 * 1024
#: what the workers must see of the driver's environment (where data and caches live)
FORWARDED_ENV = ("CM_GYM_DATA", "CM_GYM_CACHE", "CM_GYM_STRICT_PLUGINS", "OPENAI_BASE_URL", "CM_GYM_MODEL")


class RayUnavailableError(CmGymError):
    """Ray (the optional extra) is not installed."""


class ClusterError(CmGymError):
    """A Ray cluster cannot be started or reached."""


def require_ray() -> Any:
    """The ``ray`` module, or one `RayUnavailableError` naming the install command."""
    try:
        import ray
    except ImportError:
        raise RayUnavailableError(
            "Ray is not installed; it is an optional extra: pip install 'cm-gym[ray]' "
            "(or pip install -e '.[ray]' in a checkout)"
        ) from None
    return ray


def worker_env() -> dict[str, str]:
    """The driver's cm_gym environment variables, for every worker of a local instance (a
    cluster's nodes keep their own: their data may live elsewhere)."""
    return {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Make sure this process is a Ray driver: start a local instance with `num_cpus` CPUs, or join
    the cluster at `address`. Returns True when this call started (and so owns) the connection."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    common: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }
    try:
        if address:
            ray.init(address=address, **common)
            logger.info("joined the Ray cluster at %s: %s", address, ray.cluster_resources())
        else:
            store = int(os.environ.get("RAY_OBJECT_STORE_MEMORY", LOCAL_OBJECT_STORE))
            ray.init(
                num_cpus=num_cpus,
                object_store_memory=store,
                runtime_env={"env_vars": worker_env()},
                **common,
            )
            logger.info("started a local Ray instance: %s", ray.cluster_resources())
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        hint = " (start one with `ray start --head`, or drop --address for a local one)" if address else ""
        raise ClusterError(f"cannot reach {where}: {str(exc).splitlines()[0]}{hint}") from None
    return True


def disconnect() -> None:
    """Leave the cluster (stops a local instance this process started)."""
    ray = require_ray()
    if ray.is_initialized():
        ray.shutdown()
