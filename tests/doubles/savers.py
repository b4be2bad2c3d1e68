"""A bridged saver call held on its worker thread, as a cancelled turn leaves one."""

from __future__ import annotations

import asyncio

from netbox_chat.checkpoints.sqlite import BridgedSqliteSaver


async def stuck_write(saver: BridgedSqliteSaver) -> tuple[asyncio.Task[None], asyncio.Event]:
    """A bridged saver call still running on its worker thread, as one is when
    a cancelled turn ended before its last write did."""
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wait_for_release() -> None:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=30)

    call = asyncio.create_task(saver._on_thread(wait_for_release))
    await asyncio.sleep(0.05)
    return call, release
