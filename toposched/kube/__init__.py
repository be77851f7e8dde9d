"""The thin I/O layer shared by the components: connecting to the apiserver, posting Events and
following objects with list-then-watch (kubernetes_asyncio, for the operators and schedhook), and
the small urllib client of the node daemons (``nodeclient``: the exporter and the prober run on
every node, where the generated client's footprint would count), local files read with bounded
size and time (``files``: manifests, configuration, sysfs), and where servers listen by default
(``listen``)."""
