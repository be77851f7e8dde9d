"""Latency prober: runs the real netperf (TCP_RR) against netserver on peer nodes, writes the ConfigMap."""
