"""What the handlers share at run time: settings, the API client and leadership."""

import asyncio
from dataclasses import dataclass, field

from toposched.kube.rest import Kube
from toposched.operators.leader import Leadership
from toposched.operators.settings import OperatorSettings


@dataclass
class Runtime:
    settings: OperatorSettings
    api: Kube
    leadership: Leadership = field(default_factory=Leadership)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
