"""Which devices a device request matches (pure), remembered per request and device.

CEL: the selectors are evaluated with the ``cel`` package (``common-expression-language``),
with ``device`` bound as Kubernetes binds it (``driver``, ``attributes[domain][name]``,
``capacity[domain][name]`` as a string). The selectors kfed's and most drivers' classes use
(``device.driver``, ``device.attributes["domain"].name``, ``==``, ``&&``, ``||``) evaluate as
the scheduler does; a selector that cannot be compiled or evaluated for a device (a missing
attribute, a function it lacks) makes that device not match, and the reason says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from manager.api import dracel
from manager.federation.decisions.deviceinventory import Device, DeviceId
from manager.federation.decisions.deviceneed import DeviceRequest


@dataclass
class Matching:
    """Which devices a request matches, and the first reason a selector could not be
    evaluated (for the message)."""

    problems: list[str] = field(default_factory=list)
    seen: dict[tuple[DeviceRequest, DeviceId], bool] = field(default_factory=dict)

    def match(
        self, device: Device, request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]
    ) -> bool:
        key = (request, device.id)
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = self._match(device, request, classes)
        return found

    def _match(
        self, device: Device, request: DeviceRequest, classes: Mapping[str, tuple[str, ...]]
    ) -> bool:
        for expression in (*classes.get(request.device_class, ()), *request.selectors):
            verdict = dracel.matches(expression, device.driver, device.attributes, device.capacity)
            if verdict is True:
                continue
            if verdict is not False and verdict not in self.problems:
                self.problems.append(verdict)
            return False
        return True
