"""The baseline for stdio throughput: a bare asyncio line relay around a child, nothing else, on the
loop the proxy would use (`bridge.loop`).

Usage: python -m bench.relay -- CMD ARGS
"""
import asyncio
import os
import sys


async def pump(reader: asyncio.StreamReader, write, drain) -> None:
    while line := await reader.readline():
        write(line)
        await drain()


async def main(cmd: list[str]) -> int:
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                 limit=64 * 1024 * 1024)
    stdin = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), os.fdopen(0, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(1, "wb", 0))
    out = asyncio.StreamWriter(transport, protocol, None, loop)

    async def to_child() -> None:
        await pump(stdin, child.stdin.write, child.stdin.drain)
        child.stdin.close()

    task = asyncio.create_task(to_child())
    await pump(child.stdout, out.write, out.drain)
    transport.set_write_buffer_limits(0)  # drain() now waits until every byte is out, not just below 64 KiB
    await out.drain()
    await task
    return await child.wait()


if __name__ == "__main__":
    args = sys.argv[1:]
    from bridge.loop import run

    # the loop `reminder-bridge stdio` runs on (asyncio unless REMINDER_BRIDGE_LOOP says otherwise)
    raise SystemExit(run(main(args[1:] if args[:1] == ["--"] else args), "stdio"))
