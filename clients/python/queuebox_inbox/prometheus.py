"""Worker metrics in the application's own ``prometheus_client`` registry.

``QueueBoxCollector(worker, ...)`` registers (into ``prometheus_client.REGISTRY``, or the
``registry=`` you pass; ``registry=None`` to register yourself) a collector that reads each
worker's metrics from the core at scrape time: rows claimed, completed, retried, dead and
released, claims lost, claim errors, lease renewals, and the claim and handler durations as
histograms, labelled by ``source``. The core keeps and encodes them (``Worker.metrics()``
is the same text); this module only hands its families to prometheus_client, so your
``/metrics`` endpoint serves them next to your own. One collector takes any number of
workers (``add``): one name may be registered only once per registry.
``prometheus_client`` is needed only to import this module.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import REGISTRY, Collector

_DEFAULT: Any = REGISTRY


class QueueBoxCollector(Collector):
    def __init__(self, *workers: Any, registry: Any = _DEFAULT) -> None:
        self._workers: List[Any] = list(workers)
        if registry is not None:
            registry.register(self)

    def add(self, worker: Any) -> None:
        """Collects ``worker``'s metrics too (a worker not running yet reports nothing)."""
        self._workers.append(worker)

    def describe(self) -> List[Any]:
        # Names come from the core at scrape time; an empty description registers without a
        # collect() (which would run before any worker has connected).
        return []

    def collect(self) -> Iterator[Any]:
        merged: Dict[str, Any] = {}
        for worker in list(self._workers):
            text = worker.metrics()
            if not text:
                continue
            for family in text_string_to_metric_families(text):
                have = merged.get(family.name)
                if have is None:
                    merged[family.name] = family
                else:
                    # The same family from another worker: its samples carry their own source.
                    have.samples.extend(family.samples)
        return iter(merged.values())
