"""A client written with the Python SDK (`mcp` 2.x) that drives an MCP server and prints what
it answered, for the Rust tests to judge.

    python3 drive.py stdio SCRIPT.json -- PROGRAM ARG...
    python3 drive.py http SCRIPT.json URL

SCRIPT.json is a list of steps, each printing one JSON line:
- {"list_tools": true}: every page of tools/list, followed by this client ->
  {"tools": [...], "pages": N};
- {"list": "tools" | "resources" | "templates" | "prompts"}: one request, no cursor followed
  (as many clients do) -> {"list": KIND, "names": [...], "next_cursor": ...};
- {"tool": NAME, "arguments": {...}, "progress": true} -> {"structured": ..., "is_error":
  bool, "text": "...", "progress": [[progress, total, message], ...], "sampled": [prompt...]};
- {"read": URI} -> {"read": URI, "texts": [...], "blobs": N};
- {"prompt": NAME, "arguments": {...}} -> {"prompt": NAME, "messages": N};
- {"wait": METHOD, "seconds": S}: until a notification METHOD has arrived -> {"waited":
  METHOD, "seen": bool}.
The server's initialize answer is printed first, as {"server": {"name", "version"},
"protocol": "...", "capabilities": {...}}. The client declares sampling and answers every
sampling request with a canned text, recording the prompt it was given.
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


SAMPLED = []
NOTIFIED = []
CANNED = "canned answer from the test client"


async def on_sampling(context, params):
    content = params.messages[0].content if params.messages else None
    SAMPLED.append(getattr(content, "text", None))
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=CANNED),
                                     model="test-model", stop_reason="endTurn")


async def on_message(message):
    method = getattr(message, "method", None)
    if method:
        NOTIFIED.append(method)


def name_of(kind, item):
    return {"tools": lambda i: i.name, "resources": lambda i: str(i.uri),
            "templates": lambda i: i.uri_template, "prompts": lambda i: i.name}[kind](item)


async def once(session, kind):
    if kind == "tools":
        r = await session.list_tools()
        return r.tools, r.next_cursor
    if kind == "resources":
        r = await session.list_resources()
        return r.resources, r.next_cursor
    if kind == "templates":
        r = await session.list_resource_templates()
        return r.resource_templates, r.next_cursor
    r = await session.list_prompts()
    return r.prompts, r.next_cursor


async def other(session, step):
    """The steps besides list_tools and tool calls; False when `step` is none of them."""
    if "list" in step:
        items, cursor = await once(session, step["list"])
        emit({"list": step["list"], "names": [name_of(step["list"], i) for i in items], "next_cursor": cursor})
    elif "read" in step:
        r = await session.read_resource(step["read"])
        emit({"read": step["read"], "texts": [c.text for c in r.contents if getattr(c, "text", None) is not None],
              "blobs": sum(1 for c in r.contents if getattr(c, "blob", None) is not None)})
    elif "prompt" in step:
        r = await session.get_prompt(step["prompt"], step.get("arguments"))
        emit({"prompt": step["prompt"], "messages": len(r.messages)})
    elif "wait" in step:
        for _ in range(int(step.get("seconds", 30) * 10)):
            if step["wait"] in NOTIFIED:
                break
            await asyncio.sleep(0.1)
        emit({"waited": step["wait"], "seen": step["wait"] in NOTIFIED})
    else:
        return False
    return True


async def run(session, script):
    init = await session.initialize()
    emit({"server": {"name": init.server_info.name, "version": init.server_info.version},
          "protocol": str(init.protocol_version),
          "capabilities": init.capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")})
    for step in script:
        if await other(session, step):
            continue
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
        SAMPLED.clear()

        async def on_progress(progress, total, message):
            seen.append([progress, total, message])

        res = await session.call_tool(step["tool"], step.get("arguments", {}),
                                      read_timeout_seconds=120,
                                      progress_callback=on_progress if step.get("progress") else None)
        text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
        emit({"structured": res.structured_content, "is_error": bool(res.is_error), "text": text, "progress": seen,
              "sampled": list(SAMPLED)})


async def main():
    mode, script_path = sys.argv[1], sys.argv[2]
    script = json.load(open(script_path))
    if mode == "stdio":
        argv = sys.argv[sys.argv.index("--") + 1:]
        params = StdioServerParameters(command=argv[0], args=argv[1:])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, sampling_callback=on_sampling, message_handler=on_message) as s:
                await run(s, script)
    else:
        async with streamable_http_client(sys.argv[3]) as streams:
            r, w = streams[0], streams[1]
            async with ClientSession(r, w, sampling_callback=on_sampling, message_handler=on_message) as s:
                await run(s, script)


asyncio.run(main())
