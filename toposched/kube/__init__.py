"""The thin I/O layer the components share to talk to Kubernetes: who the process is to the
apiserver (``credentials``), requests and answers as both clients make them (``api``), the
operators' and schedhook's client on aiohttp (``rest``), the small urllib client of the node
daemons (``nodeclient``: the exporter and the prober run on every node, where even aiohttp's
footprint counts), list-then-watch (``watch``), Events, and one log line per outage (``outage``)."""
