"""Everything of cm_gym that runs on Ray (an optional extra: ``pip install 'cm-gym[ray]'``).

Nothing outside this package imports ``ray``; each module here imports it when used, so importing
`cm_gym` never needs Ray.

* `cluster` — start a local Ray instance or join an existing cluster (``--address``).
* `shipping` — move unit folders, snapshots and LLM-cache rows between nodes that share no disk.
* `experiments` — `RayBackend`: the experiment runner's units as Ray tasks (``--backend ray``).
* `rllib` / `rllib_modules` — selector training on RLlib (``cm-gym train --algo rllib-ppo``).
"""

from __future__ import annotations
