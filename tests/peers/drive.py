"""A client written with the Python SDK (`mcp` 2.x) that drives an MCP server and prints what
it answered, for the Rust tests to judge.

    python3 drive.py stdio SCRIPT.json -- PROGRAM ARG...
    python3 drive.py http SCRIPT.json URL

SCRIPT.json is a list of steps: {"list_tools": true} (every page of tools/list, followed by
this client) or {"tool": NAME, "arguments": {...}, "progress": true}. Each step prints one
JSON line: {"tools": [...], "pages": N} or {"structured": ..., "is_error": bool, "text":
"...", "progress": [[progress, total, message], ...]}. The server's initialize answer is
printed first, as {"server": {"name", "version"}, "protocol": "..."}.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def emit(obj):
    print(json.dumps(obj, sort_keys=True), flush=True)


async def run(session, script):
    init = await session.initialize()
    emit({"server": {"name": init.server_info.name, "version": init.server_info.version},
          "protocol": str(init.protocol_version)})
    for step in script:
        if step.get("list_tools"):
            names, pages, cursor = [], 0, None
            while True:
                pages += 1
                res = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                names += [{"name": t.name, "annotations": (t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None),
                           "input_schema": t.input_schema} for t in res.tools]
                cursor = res.next_cursor
                if not cursor or pages > 100:
                    break
            emit({"tools": names, "pages": pages})
            continue
        seen = []

        async def on_progress(progress, total, message):
            seen.append([progress, total, message])

        res = await session.call_tool(step["tool"], step.get("arguments", {}),
                                      read_timeout_seconds=120,
                                      progress_callback=on_progress if step.get("progress") else None)
        text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
        emit({"structured": res.structured_content, "is_error": bool(res.is_error), "text": text, "progress": seen})


async def main():
    mode, script_path = sys.argv[1], sys.argv[2]
    script = json.load(open(script_path))
    if mode == "stdio":
        argv = sys.argv[sys.argv.index("--") + 1:]
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await run(s, script)
    else:
        async with streamable_http_client(sys.argv[3]) as streams:
            r, w = streams[0], streams[1]
            async with ClientSession(r, w) as s:
                await run(s, script)


asyncio.run(main())
