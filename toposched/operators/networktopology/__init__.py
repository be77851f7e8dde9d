"""NetworkTopology operator: zone and region costs from measured latency, bandwidth bookkeeping."""
