"""The daemon reads the kubelet's allocatable list again when a device plugin's socket comes or
goes: the kubelet drops a stopped plugin's devices without writing its checkpoint."""

import asyncio
import socket
import time
from pathlib import Path

from toposched.exporter.daemon import Exporter
from toposched.exporter.settings import ExporterSettings


async def test_a_plugin_socket_that_comes_or_goes_opens_a_window_of_reads(tmp_path: Path) -> None:
    plugins = tmp_path / "device-plugins"
    plugins.mkdir()
    exporter = Exporter(ExporterSettings(kubelet_state_dir=tmp_path))
    watch = asyncio.create_task(exporter.watch_state_files())
    try:
        await asyncio.sleep(0.4)
        exporter.allocatable_stale = False
        (plugins / "kubelet_internal_checkpoint").write_text("{}")  # a checkpoint: read once
        await asyncio.sleep(0.6)
        assert exporter.allocatable_stale
        assert exporter.allocatable_until < time.monotonic()

        with socket.socket(socket.AF_UNIX) as plugin:
            plugin.bind(str(plugins / "gpu.sock"))
            await asyncio.sleep(0.6)
            assert exporter.allocatable_until > time.monotonic()
            exporter.allocatable_until = 0.0
        (plugins / "gpu.sock").unlink()  # the plugin went
        await asyncio.sleep(0.6)
        assert exporter.allocatable_until > time.monotonic()
    finally:
        watch.cancel()
