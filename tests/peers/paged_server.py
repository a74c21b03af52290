"""A paginated MCP test server written with the Python SDK (`mcp` 2.x, MCPServer), over stdio.

It serves one scenario file (JSON), the MCP twin of a replay file:

    {"tool": "search_items",            # the paginated tool's name
     "key": "cursor",                  # the argument that selects a reply ("cursor", "page", "offset",
                                       # or several joined by "|": "status|cursor")
     "routes": {"null": [REPLY, ...], "c2": [REPLY, ...], "3": [...]},
     "tools_list_page": 2,             # tools/list in pages of this many tools (0: one page)
     "resources": 5,                   # resources/list serves test://r/1 .. test://r/5 ...
     "resources_page": 2,              # ... in pages of this many ...
     "resources_stuck": true,          # ... the last page naming its own cursor as the next
     "tickets": {"null": {...}, "t2": {...}},  # json_tickets(cursor): the page for each cursor,
                                       # returned as JSON text (`-> str`: the SDK wraps it as
                                       # structuredContent {"result": TEXT})
     "no_prompts": true,               # no prompts/list at all (-32601)
     "print_env": "NAME"}              # print this variable to stderr at start (secret tests)

The route key is the selecting argument's value as text ("null" when absent). A route answers
its successive calls with successive replies, the last one repeating (retries). A reply is
{"structured": {...}} (structuredContent, with the JSON text beside it, as the SDK does),
{"text": "..."} (a text block only), {"is_error": "words"} (isError: true), or
{"jsonrpc_error": "words"} (a JSON-RPC error) or {"exit": N} (the server dies). A call no route answers is a JSON-RPC error,
so a scan cannot pass by accident. Every call's arguments are appended to the file named by
the environment variable PEER_CALL_LOG, one JSON object per line.
"""

import json
import os
import sys
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

scenario = json.load(open(sys.argv[1]))
tool_name = scenario.get("tool", "search_items")
key = scenario.get("key", "cursor")
served: dict[str, int] = {}

if scenario.get("print_env"):
    print(f"env {os.environ.get(scenario['print_env'], '')}", file=sys.stderr, flush=True)


class PagedServer(MCPServer):
    """tools/list in pages of `tools_list_page` tools, with opaque cursors."""

    async def _handle_list_tools(self, ctx, params):  # type: ignore[override]
        tools = await self.list_tools()
        per = int(scenario.get("tools_list_page", 0))
        if per <= 0:
            return types.ListToolsResult(tools=tools)
        start = 0
        cursor = params.cursor if params is not None else None
        if cursor is not None:
            if not cursor.startswith("tl-"):
                raise MCPError(code=-32602, message="invalid cursor")
            start = int(cursor[3:])
        nxt = start + per
        return types.ListToolsResult(
            tools=tools[start:nxt], next_cursor=(f"tl-{nxt}" if nxt < len(tools) else None)
        )


    async def _handle_list_resources(self, ctx, params):  # type: ignore[override]
        n, per = int(scenario.get("resources", 0)), int(scenario.get("resources_page", 0)) or 1
        every = [types.Resource(uri=f"test://r/{i}", name=f"r{i}") for i in range(1, n + 1)]
        cursor = params.cursor if params is not None else None
        start = 0
        if cursor is not None:
            if not cursor.startswith("rs-"):
                raise MCPError(code=-32602, message="invalid cursor")
            start = int(cursor[3:])
        nxt = start + per
        if nxt < n:
            return types.ListResourcesResult(resources=every[start:nxt], next_cursor=f"rs-{nxt}")
        # The last page: with resources_stuck it names its own cursor again (a server bug).
        again = f"rs-{start}" if scenario.get("resources_stuck") and start > 0 else None
        return types.ListResourcesResult(resources=every[start:nxt], next_cursor=again)


server = PagedServer("paged-test-server", version="9.9.1")
if scenario.get("no_prompts"):
    # A server without prompts: prompts/list is an unknown method (-32601).
    server._lowlevel_server._request_handlers.pop("prompts/list", None)


def answer(arguments: dict[str, Any]) -> types.CallToolResult:
    log = os.environ.get("PEER_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(arguments, sort_keys=True) + "\n")
    # A key of several argument names ("status|cursor") routes on their values joined by "|".
    parts = []
    for name in key.split("|"):
        value = arguments.get(name)
        parts.append("null" if value is None else str(value))
    route = "|".join(parts)
    replies = scenario["routes"].get(route)
    if replies is None:
        raise MCPError(code=-32602, message=f"no route for {key}")
    n = served.get(route, 0)
    served[route] = n + 1
    reply = replies[min(n, len(replies) - 1)]
    if "exit" in reply:
        os._exit(int(reply["exit"]))
    if "jsonrpc_error" in reply:
        raise MCPError(code=-32603, message=reply["jsonrpc_error"])
    if "is_error" in reply:
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply["is_error"])], is_error=True)
    if "text" in reply:
        return types.CallToolResult(content=[types.TextContent(type="text", text=reply["text"])])
    body = reply["structured"]
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))], structured_content=body
    )


@server.tool(name=tool_name)
def paged(
    cursor: str | None = None,
    page: int | None = None,
    offset: int | None = None,
    page_size: int | None = None,
    status: str | None = None,
) -> types.CallToolResult:
    """A paginated search: one page per call."""
    args = {"cursor": cursor, "page": page, "offset": offset, "page_size": page_size, "status": status}
    return answer({k: v for k, v in args.items() if v is not None})


@server.tool()
def echo(text: str) -> str:
    """Returns its argument."""
    return text


@server.tool()
def json_tickets(cursor: str | None = None) -> str:
    """Tickets as JSON text, a page per call (the shape MCPServer gives a `-> str` tool)."""
    page = scenario.get("tickets", {}).get("null" if cursor is None else cursor)
    if page is None:
        raise MCPError(code=-32602, message="no such page")
    return json.dumps(page)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool named NAME and says that the tool list changed."""
    server.add_tool(lambda: name, name=name, description=f"added at run time: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def whoami() -> str:
    """A third tool, so that a two-per-page tools/list has two pages."""
    return "paged-test-server"


if __name__ == "__main__":
    server.run("stdio")
