"""AppGroup (``appgroup.diktyo.x-k8s.io/v1alpha1``): a workload dependency graph."""

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field

from toposched.apis.constants import APPGROUP_GROUP, APPGROUP_PLURAL, APPGROUP_VERSION
from toposched.apis.limits import MAX_DEPENDENCIES, MAX_WORKLOADS
from toposched.apis.meta import CamelModel, Condition, KubeObject
from toposched.apis.quantity import Bandwidth, TotalBandwidth


class SortingAlgorithm(StrEnum):
    KAHN = "KahnSort"
    TARJAN = "TarjanSort"
    REVERSE_KAHN = "ReverseKahn"
    REVERSE_TARJAN = "ReverseTarjan"
    ALTERNATE_KAHN = "AlternateKahn"
    ALTERNATE_TARJAN = "AlternateTarjan"


LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
"""A non-empty label value: pods carry the selector as the value of the workload label."""


class WorkloadInfo(CamelModel):
    kind: str
    name: str
    selector: str = Field(max_length=63, pattern=LABEL_VALUE)
    api_version: str | None = None
    namespace: str | None = None


class DependenciesInfo(CamelModel):
    workload: WorkloadInfo
    min_bandwidth: Bandwidth | None = None
    max_network_cost: int | None = Field(default=None, ge=0, le=10000)


class AppGroupWorkload(CamelModel):
    workload: WorkloadInfo
    dependencies: list[DependenciesInfo] | None = Field(default=None, max_length=MAX_DEPENDENCIES)


class AppGroupSpec(CamelModel):
    num_members: int = Field(ge=1)
    topology_sorting_algorithm: SortingAlgorithm = SortingAlgorithm.KAHN
    workloads: list[AppGroupWorkload] = Field(max_length=MAX_WORKLOADS)


class WorkloadStatistics(CamelModel):
    """Statistics fields of newer appgroup-api releases; accepted and kept, not computed here."""

    min_bandwidth: TotalBandwidth | None = None
    avg_bandwidth: TotalBandwidth | None = None
    max_bandwidth: TotalBandwidth | None = None
    min_cost: int | None = None
    avg_cost: int | None = None
    max_cost: int | None = None


class TopologyInfo(CamelModel):
    workload: WorkloadInfo
    index: int = Field(ge=1)
    workload_statistics: WorkloadStatistics | None = None


class AppGroupStatus(CamelModel):
    running_workloads: int | None = Field(default=None, ge=0)
    schedule_start_time: datetime | None = None
    topology_calculation_time: datetime | None = None
    topology_order: list[TopologyInfo] | None = Field(default=None, max_length=MAX_WORKLOADS)
    app_group_statistics: WorkloadStatistics | None = None
    observed_generation: int | None = None
    conditions: list[Condition] | None = None


class AppGroup(KubeObject):
    GROUP = APPGROUP_GROUP
    VERSION = APPGROUP_VERSION
    PLURAL = APPGROUP_PLURAL
    NAMESPACED = True

    api_version: Literal["appgroup.diktyo.x-k8s.io/v1alpha1"] = "appgroup.diktyo.x-k8s.io/v1alpha1"
    kind: Literal["AppGroup"] = "AppGroup"
    spec: AppGroupSpec
    status: AppGroupStatus | None = None
