"""Node exporter: sysfs NUMA topology and kubelet PodResources to NodeResourceTopology."""
