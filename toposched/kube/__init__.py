"""The thin I/O layer shared by the components: who the process is to the apiserver
(``credentials``), the operators' and schedhook's JSON client on aiohttp (``rest``), list-then-watch
(``watch``), Events, the small urllib client of the node daemons (``nodeclient``: the exporter and
the prober run on every node, where even aiohttp's footprint counts), local files read with
bounded size and time (``files``: manifests, configuration, sysfs), and where servers listen by
default (``listen``)."""
