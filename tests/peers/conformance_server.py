"""An MCP server written with the Python SDK (`mcp` 2.x, the low-level `Server`) that implements
the fixtures the server scenarios of `@modelcontextprotocol/conformance` 0.1.12 expect, so that
most scenarios apply to it: the tools `test_*` and `json_schema_2020_12_tool`, the resources
`test://static-text`, `test://static-binary`, `test://watched-resource` and the template
`test://template/{id}/data`, the prompts `test_*`, completion, logging and subscriptions.

    python3 conformance_server.py stdio
    python3 conformance_server.py http PORT      # streamable HTTP at http://127.0.0.1:PORT/mcp

In HTTP mode it prints `serving http://127.0.0.1:PORT/mcp` to stderr once listening.
"""

import asyncio
import base64
import json
import sys
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

# A 1x1 red PNG and a tiny WAV (44-byte header, no samples).
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x44\xac\x00\x00\x88\x58\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()
SCHEMA_2020 = "https://json-schema.org/draft/2020-12/schema"


def text(t: str) -> types.TextContent:
    return types.TextContent(type="text", text=t)


def tool(name: str, description: str, properties: dict | None = None, required: list | None = None) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = [
    tool("test_simple_text", "Returns simple text content"),
    tool("test_image_content", "Returns image content"),
    tool("test_audio_content", "Returns audio content"),
    tool("test_embedded_resource", "Returns an embedded resource"),
    tool("test_multiple_content_types", "Returns text, an image and a resource"),
    tool("test_tool_with_logging", "Sends three log messages while it runs"),
    tool("test_error_handling", "Always fails with isError"),
    tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100"),
    tool("test_sampling", "Asks the client for an LLM completion", {"prompt": {"type": "string"}}, ["prompt"]),
    tool("test_elicitation", "Asks the user for input", {"message": {"type": "string"}}, ["message"]),
    tool("test_elicitation_sep1034_defaults", "Elicitation with defaults for every primitive type"),
    tool("test_elicitation_sep1330_enums", "Elicitation with the five enum shapes"),
    tool("test_reconnection", "Closes its SSE stream mid-call, then answers (SEP-1699)"),
    types.Tool(
        name="json_schema_2020_12_tool",
        description="Tool with JSON Schema 2020-12 features",
        input_schema={
            "$schema": SCHEMA_2020,
            "type": "object",
            "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
]


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    name, args = params.name, params.arguments or {}
    if name == "test_simple_text":
        return types.CallToolResult(content=[text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    if name == "test_embedded_resource":
        res = types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain",
                                         text="This is an embedded resource content.")
        return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=res)])
    if name == "test_multiple_content_types":
        res = types.TextResourceContents(uri="test://mixed-content-resource", mime_type="application/json",
                                         text=json.dumps({"test": "data", "value": 123}))
        return types.CallToolResult(content=[
            text("Multiple content types test:"),
            types.ImageContent(type="image", data=PNG, mime_type="image/png"),
            types.EmbeddedResource(type="resource", resource=res),
        ])
    if name == "test_tool_with_logging":
        for i, words in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
            if i:
                await asyncio.sleep(0.05)
            await ctx.session.send_log_message("info", words, related_request_id=ctx.request_id)
        return types.CallToolResult(content=[text("Tool with logging executed successfully")])
    if name == "test_error_handling":
        return types.CallToolResult(content=[text("This tool intentionally returns an error for testing")], is_error=True)
    if name == "test_tool_with_progress":
        # A no-op when the request carries no progress token.
        for i, p in enumerate([0, 50, 100]):
            if i:
                await asyncio.sleep(0.05)
            await ctx.session.report_progress(p, 100)
        return types.CallToolResult(content=[text("Tool with progress executed successfully")])
    if name == "test_sampling":
        r = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=text(str(args.get("prompt", ""))))],
            max_tokens=100, related_request_id=ctx.request_id)
        answer = r.content.text if getattr(r.content, "type", "") == "text" else str(r.content)
        return types.CallToolResult(content=[text(f"LLM response: {answer}")])
    if name == "test_elicitation":
        schema = {"type": "object", "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}}, "required": ["username", "email"]}
        r = await ctx.session.elicit_form(str(args.get("message", "")), schema, related_request_id=ctx.request_id)
        return types.CallToolResult(content=[text(f"User response: action={r.action}, content={json.dumps(r.content)}")])
    if name == "test_elicitation_sep1034_defaults":
        schema = {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True}}}
        r = await ctx.session.elicit_form("Please review your information", schema, related_request_id=ctx.request_id)
        return types.CallToolResult(content=[text(f"Elicitation completed: action={r.action}, content={json.dumps(r.content)}")])
    if name == "test_elicitation_sep1330_enums":
        schema = {"type": "object", "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}]}}}}
        r = await ctx.session.elicit_form("Please select options", schema, related_request_id=ctx.request_id)
        return types.CallToolResult(content=[text(f"Elicitation completed: action={r.action}, content={json.dumps(r.content)}")])
    if name == "test_reconnection":
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await asyncio.sleep(0.1)
        return types.CallToolResult(content=[text("Reconnection test completed")])
    if name == "json_schema_2020_12_tool":
        return types.CallToolResult(content=[text(f"received {json.dumps(args, sort_keys=True)}")])
    raise MCPError(code=-32602, message=f"unknown tool {name}")


RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", description="A static text resource", mime_type="text/plain"),
    types.Resource(uri="test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png"),
    types.Resource(uri="test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain"),
]


async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == "test://static-text":
        c = types.TextResourceContents(uri=uri, mime_type="text/plain", text="This is the content of the static text resource.")
    elif uri == "test://static-binary":
        c = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        c = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content.")
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        ident = uri[len("test://template/"):-len("/data")]
        c = types.TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps({"id": ident, "templateTest": True}))
    else:
        raise MCPError(code=-32002, message="resource not found")
    return types.ReadResourceResult(contents=[c])


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A prompt without arguments"),
    types.Prompt(name="test_prompt_with_arguments", description="A prompt with two arguments", arguments=[
        types.PromptArgument(name="arg1", description="First test argument", required=True),
        types.PromptArgument(name="arg2", description="Second test argument", required=True)]),
    types.Prompt(name="test_prompt_with_embedded_resource", description="A prompt embedding a resource", arguments=[
        types.PromptArgument(name="resourceUri", description="URI of the resource to embed", required=True)]),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


async def get_prompt(ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    user = lambda content: types.PromptMessage(role="user", content=content)  # noqa: E731
    if params.name == "test_simple_prompt":
        return types.GetPromptResult(messages=[user(text("This is a simple prompt for testing."))])
    if params.name == "test_prompt_with_arguments":
        return types.GetPromptResult(messages=[user(text(
            f"Prompt with arguments: arg1='{args.get('arg1', '')}', arg2='{args.get('arg2', '')}'"))])
    if params.name == "test_prompt_with_embedded_resource":
        res = types.TextResourceContents(uri=args.get("resourceUri", "test://example-resource"), mime_type="text/plain",
                                         text="Embedded resource content for testing.")
        return types.GetPromptResult(messages=[user(types.EmbeddedResource(type="resource", resource=res)),
                                               user(text("Please process the embedded resource above."))])
    if params.name == "test_prompt_with_image":
        return types.GetPromptResult(messages=[user(types.ImageContent(type="image", data=PNG, mime_type="image/png")),
                                               user(text("Please analyze the image above."))])
    raise MCPError(code=-32602, message=f"unknown prompt {params.name}")


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=TOOLS)


async def list_resources(ctx, params):
    return types.ListResourcesResult(resources=RESOURCES)


async def list_templates(ctx, params):
    return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
        uri_template="test://template/{id}/data", name="template", description="A template with one parameter",
        mime_type="application/json")])


async def list_prompts(ctx, params):
    return types.ListPromptsResult(prompts=PROMPTS)


async def complete(ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
    values = [v for v in ["paris", "park", "party"] if v.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


SUBSCRIBED: set[str] = set()


async def subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


async def set_level(ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


import warnings  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    server = Server(
        "conformance-test-server", version="1.0.0",
        on_list_tools=list_tools, on_call_tool=call_tool,
        on_list_resources=list_resources, on_list_resource_templates=list_templates,
        on_read_resource=read_resource, on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt, on_completion=complete,
        on_set_logging_level=set_level,
    )


async def main() -> None:
    options = server.create_initialization_options(NotificationOptions(resources_changed=True, tools_changed=True,
                                                                        prompts_changed=True))
    if sys.argv[1] == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (r, w):
            await server.run(r, w, options)
        return
    import uvicorn

    port = int(sys.argv[2])
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    print(f"serving http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    await srv.serve()


asyncio.run(main())
