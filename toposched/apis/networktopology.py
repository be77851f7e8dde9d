"""NetworkTopology (``networktopology.diktyo.x-k8s.io/v1alpha1``): costs between regions and zones."""

from datetime import datetime
from typing import Literal, Self

from pydantic import Field, model_validator

from toposched.apis.constants import NETWORKTOPOLOGY_GROUP, NETWORKTOPOLOGY_PLURAL, NETWORKTOPOLOGY_VERSION
from toposched.apis.meta import CamelModel, Condition, KubeObject
from toposched.apis.quantity import TotalBandwidth


class CostInfo(CamelModel):
    destination: str
    network_cost: int = Field(ge=0)
    bandwidth_capacity: TotalBandwidth | None = None
    bandwidth_allocated: TotalBandwidth | None = None
    is_allowed: bool | None = None


class OriginStatistics(CamelModel):
    """Statistics fields of newer networktopology-api releases; accepted and kept."""

    min_bandwidth: TotalBandwidth | None = None
    avg_bandwidth: TotalBandwidth | None = None
    max_bandwidth: TotalBandwidth | None = None
    min_cost: int | None = None
    avg_cost: int | None = None
    max_cost: int | None = None


class OriginInfo(CamelModel):
    origin: str
    cost_list: list[CostInfo] | None = None
    origin_inter_statistics: OriginStatistics | None = None
    origin_intra_statistics: OriginStatistics | None = None


class TopologyInfo(CamelModel):
    topology_key: str
    origin_list: list[OriginInfo]


class WeightInfo(CamelModel):
    name: str
    topology_list: list[TopologyInfo]


class NetworkTopologySpec(CamelModel):
    configmap_name: str
    """Checked to be a ConfigMap name by the operator, not here: upstream's own example names one
    that cannot exist (``netperfMetrics``), and the object must still be read and reported."""
    weights: list[WeightInfo]

    @model_validator(mode="after")
    def _unique_weights(self) -> Self:
        seen: set[str] = set()
        for weight in self.weights:
            if weight.name in seen:
                raise ValueError(f"weight name {weight.name!r} is listed twice")
            seen.add(weight.name)
        return self


class NetworkTopologyStatus(CamelModel):
    node_count: int | None = Field(default=None, ge=0)
    weight_calculation_time: datetime | None = None
    observed_generation: int | None = None
    conditions: list[Condition] | None = None


class NetworkTopology(KubeObject):
    GROUP = NETWORKTOPOLOGY_GROUP
    VERSION = NETWORKTOPOLOGY_VERSION
    PLURAL = NETWORKTOPOLOGY_PLURAL
    NAMESPACED = True

    api_version: Literal["networktopology.diktyo.x-k8s.io/v1alpha1"] = "networktopology.diktyo.x-k8s.io/v1alpha1"
    kind: Literal["NetworkTopology"] = "NetworkTopology"
    spec: NetworkTopologySpec
    status: NetworkTopologyStatus | None = None
